/**
 * Charts: uPlot (canvas) for curves and series, sized to its container and redrawn when the
 * container's width changes; a plain SVG lon/lat plot for search results' shapes.
 */
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { type Position, type Shape, boundsOf } from "./geometry.ts";

const HEIGHT = 300;

/** A uPlot chart that fills its container's width; `label` names it for screen readers (the data is in a table beside it). */
export function Chart({
  label,
  options,
  data,
}: {
  label: string;
  options: Omit<uPlot.Options, "width" | "height">;
  data: uPlot.AlignedData;
}) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const width = () => Math.max(240, element.clientWidth);
    const chart = new uPlot({ ...options, width: width(), height: HEIGHT } as uPlot.Options, data, element);
    const observer = new ResizeObserver(() => chart.setSize({ width: width(), height: HEIGHT }));
    observer.observe(element);
    return () => {
      observer.disconnect();
      chart.destroy();
    };
  }, [options, data]);
  return <div class="chart" ref={box} role="img" aria-label={label} />;
}

const PALETTE = ["#0b5cad", "#c2410c", "#15803d", "#7c3aed", "#b91c1c", "#0e7490", "#a16207", "#be185d"];
export const colour = (index: number) => PALETTE[index % PALETTE.length]!;

const W = 640;
const H = 400;
const M = 52;

/** Shapes of labelled items on a lon/lat plane: equal degrees on both axes would squash high latitudes, so each axis fills the frame. */
export function LonLatPlot({ items, label }: { items: ReadonlyArray<{ label: string; shapes: Shape[] }>; label: string }) {
  const bounds = boundsOf(items.flatMap((i) => i.shapes));
  if (!bounds) return <p class="hint">No geometry in these results.</p>;
  const x = (lon: number) => M + ((lon - bounds.west) / (bounds.east - bounds.west)) * (W - 2 * M);
  const y = (lat: number) => H - M - ((lat - bounds.south) / (bounds.north - bounds.south)) * (H - 2 * M);
  const path = (points: Position[], close: boolean) =>
    points.map(([lon, lat], i) => `${i ? "L" : "M"}${x(lon).toFixed(1)},${y(lat).toFixed(1)}`).join("") + (close ? "Z" : "");
  const ticks = (from: number, to: number) => [0, 0.25, 0.5, 0.75, 1].map((f) => from + f * (to - from));
  return (
    <div class="plot">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={label}>
        <title>{label}</title>
        {ticks(bounds.west, bounds.east).map((lon) => (
          <g key={`x${lon}`}>
            <line x1={x(lon)} x2={x(lon)} y1={M} y2={H - M} stroke="#e3e7ec" />
            <text x={x(lon)} y={H - M + 16} font-size="11" text-anchor="middle" fill="#5b6470">
              {lon.toFixed(2)}°
            </text>
          </g>
        ))}
        {ticks(bounds.south, bounds.north).map((lat) => (
          <g key={`y${lat}`}>
            <line x1={M} x2={W - M} y1={y(lat)} y2={y(lat)} stroke="#e3e7ec" />
            <text x={M - 4} y={y(lat) + 4} font-size="11" text-anchor="end" fill="#5b6470">
              {lat.toFixed(2)}°
            </text>
          </g>
        ))}
        {items.map((item, index) => (
          <g key={item.label} stroke={colour(index)} fill={colour(index)} data-label={item.label}>
            <title>{item.label}</title>
            {item.shapes.map((shape, i) =>
              shape.kind === "point" ? (
                <circle key={i} cx={x(shape.at[0])} cy={y(shape.at[1])} r="5" fill-opacity="0.8" />
              ) : shape.kind === "line" ? (
                <path key={i} d={path(shape.points, false)} fill="none" stroke-width="2" />
              ) : (
                <path
                  key={i}
                  d={shape.rings.map((ring) => path(ring, true)).join("")}
                  fill-opacity="0.2"
                  fill-rule="evenodd"
                  stroke-width="1.5"
                />
              ),
            )}
          </g>
        ))}
      </svg>
      <p class="legend">
        <span>x: longitude</span>
        <span>y: latitude (WGS84, plain lon/lat plane)</span>
      </p>
    </div>
  );
}
