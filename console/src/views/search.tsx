/** Search: an OSDU query (kind, query, returned fields, limit, spatial filter); results as a table and their shapes on a lon/lat plot. */
import { useState } from "preact/hooks";
import type { QueryRequest, QueryResponse, SpatialFilter } from "../../../subjects/search.ts";
import { type Session, search } from "../api.ts";
import { LonLatPlot, colour } from "../charts.tsx";
import { shapesOf } from "../geometry.ts";
import { fieldValue, resultColumns } from "../model.ts";
import { ErrorNote, Field, Section, Select, Table } from "../ui.tsx";

const FILTERS = ["none", "bounding box", "distance"] as const;

export function SearchView({ session }: { session: Session }) {
  const [kind, setKind] = useState("*:*:*:*");
  const [query, setQuery] = useState("");
  const [fields, setFields] = useState("");
  const [limit, setLimit] = useState("50");
  const [filter, setFilter] = useState<string>("none");
  const [geoField, setGeoField] = useState("data.SpatialLocation.Wgs84Coordinates");
  const [box, setBox] = useState({ west: "", south: "", east: "", north: "" });
  const [circle, setCircle] = useState({ latitude: "", longitude: "", distance: "" });
  const [answer, setAnswer] = useState<{ request: QueryRequest; response: QueryResponse }>();
  const [error, setError] = useState<unknown>();

  const spatialFilter = (): SpatialFilter | undefined => {
    if (filter === "bounding box")
      return {
        field: geoField,
        byBoundingBox: {
          topLeft: { latitude: Number(box.north), longitude: Number(box.west) },
          bottomRight: { latitude: Number(box.south), longitude: Number(box.east) },
        },
      };
    if (filter === "distance")
      return {
        field: geoField,
        byDistance: {
          point: { latitude: Number(circle.latitude), longitude: Number(circle.longitude) },
          distance: Number(circle.distance),
        },
      };
    return undefined;
  };
  const run = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    const returned = fields
      .split(",")
      .map((f) => f.trim())
      .filter(Boolean);
    const request: QueryRequest = {
      kind,
      ...(query.trim() ? { query } : {}),
      ...(returned.length ? { returnedFields: returned } : {}),
      ...(limit ? { limit: Number(limit) } : {}),
      ...(spatialFilter() ? { spatialFilter: spatialFilter() } : {}),
    };
    try {
      setAnswer({ request, response: await search(session, request) });
    } catch (failure) {
      setError(failure);
    }
  };
  const results = answer?.response.results ?? [];
  const columns = answer ? resultColumns(results, answer.request.returnedFields ?? undefined) : [];
  const plotted = results.map((r, i) => ({ label: String(r.id ?? `result ${i + 1}`), shapes: shapesOf(r.data ?? r) }));
  return (
    <div class="grid">
      <Section title="Query" wide>
        <form class="row" onSubmit={run}>
          <Field label="Kind" value={kind} onValue={setKind} required />
          <Field label="Query" value={query} onValue={setQuery} placeholder="data.FacilityName:Volve*" />
          <Field label="Returned fields" value={fields} onValue={setFields} placeholder="id, data.FacilityName" />
          <Field label="Limit" value={limit} onValue={setLimit} type="number" />
          <Select label="Spatial filter" value={filter} options={FILTERS} onValue={setFilter} />
          {filter !== "none" ? <Field label="Geometry field" value={geoField} onValue={setGeoField} /> : null}
          {filter === "bounding box" ? (
            <>
              <Field label="West" value={box.west} onValue={(west) => setBox({ ...box, west })} type="number" />
              <Field label="South" value={box.south} onValue={(south) => setBox({ ...box, south })} type="number" />
              <Field label="East" value={box.east} onValue={(east) => setBox({ ...box, east })} type="number" />
              <Field label="North" value={box.north} onValue={(north) => setBox({ ...box, north })} type="number" />
            </>
          ) : null}
          {filter === "distance" ? (
            <>
              <Field label="Latitude" value={circle.latitude} onValue={(latitude) => setCircle({ ...circle, latitude })} type="number" />
              <Field
                label="Longitude"
                value={circle.longitude}
                onValue={(longitude) => setCircle({ ...circle, longitude })}
                type="number"
              />
              <Field
                label="Distance (m)"
                value={circle.distance}
                onValue={(distance) => setCircle({ ...circle, distance })}
                type="number"
              />
            </>
          ) : null}
          <button type="submit">Search</button>
        </form>
        <ErrorNote error={error} />
      </Section>
      {answer ? (
        <>
          <Section title="Results">
            <p role="status">
              {answer.response.totalCount} found, {results.length} shown
            </p>
            <Table caption="Search results" head={columns}>
              {results.map((result, i) => (
                <tr key={String(result.id ?? i)}>
                  {columns.map((column, c) =>
                    c === 0 ? (
                      <th scope="row" key={column} class="mono">
                        <span class="swatch" style={{ background: colour(i) }} /> {fieldValue(result, column)}
                      </th>
                    ) : (
                      <td key={column}>{fieldValue(result, column)}</td>
                    ),
                  )}
                </tr>
              ))}
            </Table>
          </Section>
          <Section title="Map">
            <LonLatPlot items={plotted} label={`Shapes of ${plotted.filter((p) => p.shapes.length).length} results on a lon/lat plot`} />
          </Section>
        </>
      ) : null}
    </div>
  );
}
