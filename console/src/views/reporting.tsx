/**
 * Reporting: a prospect analysis's expectation curve (risked and success case, P90/P50/P10 marked) and
 * chance of success per segment; a prospect's full-cycle analyses as cash-flow charts with their
 * indicators; a multiple-scenario analysis's outcome tree summary.
 */
import { useMemo, useState } from "preact/hooks";
import type uPlot from "uplot";
import type { AggregationTask } from "../../../subjects/reporting.ts";
import { type Session, reporting } from "../api.ts";
import { Chart, colour } from "../charts.tsx";
import { type OutcomeNode, type ProspectAggregation, expectationCurve, outcomeKindLabel, outcomeRows, percentileMarks } from "../model.ts";
import { ErrorNote, Field, Section, Select, Table, formatNumber, formatPercent } from "../ui.tsx";

const KINDS = { prospect: "prospect analysis", fullCycle: "full-cycle analyses", scenarios: "scenario analysis" } as const;
type Kind = keyof typeof KINDS;
const DEFAULT_IDS: Record<Kind, string> = { prospect: "pa-alpha-oil", fullCycle: "pa-alpha-oil", scenarios: "msa-alpha" };
const kindOf = (label: string) => (Object.keys(KINDS) as Kind[]).find((k) => KINDS[k] === label) ?? "prospect";

export function ReportingView({ session }: { session: Session }) {
  const [kind, setKind] = useState<Kind>("prospect");
  const [id, setId] = useState(DEFAULT_IDS.prospect);
  const [opened, setOpened] = useState<{ kind: Kind; body: Record<string, unknown> }>();
  const [error, setError] = useState<unknown>();
  const [task, setTask] = useState<AggregationTask>();
  const open = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setOpened(undefined);
    setTask(undefined);
    try {
      const body = await reporting[kind](session, id, setTask);
      setOpened({ kind, body });
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <div class="grid">
      <Section title="Open an analysis" wide>
        <form class="row" onSubmit={open}>
          <Select
            label="Analysis"
            value={KINDS[kind]}
            options={Object.values(KINDS)}
            onValue={(label) => {
              const next = kindOf(label);
              setKind(next);
              setId(DEFAULT_IDS[next]);
            }}
          />
          <Field label={kind === "scenarios" ? "Scenario analysis id" : "Prospect analysis id"} value={id} onValue={setId} required />
          <button type="submit">Open</button>
        </form>
        {task ? (
          <p role="status">
            A large aggregation, computed by task {task.taskId} ({task.state}, work {task.work.toLocaleString("en")}).
          </p>
        ) : null}
        <ErrorNote error={error} />
      </Section>
      {opened?.kind === "prospect" ? <Prospect aggregation={opened.body as unknown as ProspectAggregation} /> : null}
      {opened?.kind === "fullCycle" ? <FullCycle aggregation={opened.body as unknown as FullCycleAggregation} /> : null}
      {opened?.kind === "scenarios" ? <Scenarios aggregation={opened.body as unknown as ScenarioAggregation} /> : null}
    </div>
  );
}

/** Vertical dashed lines with their labels at the given x values (P90/P50/P10). */
const markers = (marks: ReadonlyArray<{ label: string; volume: number }>): uPlot.Plugin => ({
  hooks: {
    draw: [
      (u: uPlot) => {
        const { ctx, bbox } = u;
        ctx.save();
        ctx.setLineDash([5, 4]);
        ctx.strokeStyle = "#5b6470";
        ctx.fillStyle = "#1b1f24";
        ctx.font = `${Math.round(11 * devicePixelRatio)}px system-ui, sans-serif`;
        for (const mark of marks) {
          const x = u.valToPos(mark.volume, "x", true);
          ctx.beginPath();
          ctx.moveTo(x, bbox.top);
          ctx.lineTo(x, bbox.top + bbox.height);
          ctx.stroke();
          ctx.fillText(mark.label, x + 4, bbox.top + 14 * devicePixelRatio);
        }
        ctx.restore();
      },
    ],
  },
});

function Prospect({ aggregation }: { aggregation: ProspectAggregation }) {
  const products = Object.keys(aggregation.resources.products);
  const [product, setProduct] = useState(aggregation.resources.primaryProduct);
  const resources = aggregation.resources.products[product]!;
  const pg = aggregation.chanceOfSuccess.pgAtLeastOne;
  const { options, data } = useMemo(() => {
    const curve = expectationCurve(resources, pg);
    const options: Omit<uPlot.Options, "width" | "height"> = {
      scales: { x: { time: false, distr: 3 }, y: { range: [0, 1] } },
      axes: [
        { label: `${product} (${resources.unit}), log scale` },
        { label: "P(volume ≥ x)", values: (_u: uPlot, values: number[]) => values.map((v) => `${Math.round(v * 100)} %`) },
      ],
      series: [
        { label: resources.unit },
        { label: "risked", stroke: colour(0), width: 2, value: (_u: uPlot, v: number | null) => formatPercent(v) },
        { label: "success case", stroke: colour(1), width: 2, dash: [6, 3], value: (_u: uPlot, v: number | null) => formatPercent(v) },
      ],
      plugins: [markers(percentileMarks(resources))],
    };
    return { options, data: [curve.volumes, curve.risked, curve.success] as uPlot.AlignedData };
  }, [resources, pg, product]);
  const mefs = aggregation.chanceOfSuccess.mefs;
  return (
    <>
      <Section title={`Prospect ${aggregation.prospect.name ?? aggregation.prospect.id}`}>
        <dl class="facts">
          <dt>Analysis</dt>
          <dd>
            {aggregation.prospectAnalysisId} ({aggregation.status ?? "—"})
          </dd>
          <dt>Dependency</dt>
          <dd>{aggregation.dependency?.model ?? "—"}</dd>
          <dt>Chance of success (≥ 1 segment)</dt>
          <dd>{formatPercent(pg)}</dd>
          <dt>All segments succeed</dt>
          <dd>{formatPercent(aggregation.chanceOfSuccess.pgAll)}</dd>
          <dt>Commercial chance</dt>
          <dd>
            {formatPercent(aggregation.chanceOfSuccess.pCommercial)}
            {mefs ? ` (MEFS ${mefs.value} ${mefs.unit})` : ""}
          </dd>
        </dl>
        <div class="row">
          <Select label="Product" value={product} options={products} onValue={setProduct} />
        </div>
        <Table caption={`Volumes of ${product} (${resources.unit})`} head={["", "P90", "P50", "P10", "mean"]}>
          <tr>
            <th scope="row">success case</th>
            <td>{formatNumber(resources.successCase.p90)}</td>
            <td>{formatNumber(resources.successCase.p50)}</td>
            <td>{formatNumber(resources.successCase.p10)}</td>
            <td>{formatNumber(resources.successCase.mean)}</td>
          </tr>
          <tr>
            <th scope="row">risked</th>
            <td colSpan={3} />
            <td>{formatNumber(resources.riskedMean)}</td>
          </tr>
        </Table>
      </Section>
      <Section title="Expectation curve">
        <Chart
          label={`Expectation curve of ${product}: probability of exceeding a volume, risked and success case, P90, P50 and P10 marked`}
          options={options}
          data={data}
        />
      </Section>
      <Section title="Chance of success per segment" wide>
        <Table caption="Each segment's chance of success" head={["segment", "Pg", "", "given common success", "risked mean"]}>
          {aggregation.segments.map((segment) => (
            <tr key={segment.segmentAnalysisId}>
              <th scope="row">{segment.name}</th>
              <td>{formatPercent(segment.pg)}</td>
              <td style={{ width: "30%" }}>
                <div class="bar" style={{ width: `${Math.round(segment.pg * 100)}%` }} />
              </td>
              <td>{formatPercent(segment.pgConditionalOnCommon)}</td>
              <td>
                {formatNumber(segment.riskedMean)} {segment.unit ?? ""}
              </td>
            </tr>
          ))}
        </Table>
      </Section>
    </>
  );
}

type CashFlowYear = { year: number; netCashFlow: number };
type FullCycleAnalysis = {
  fullCycleAnalysisId: string;
  name?: string;
  resourceCase?: string;
  cashFlows: Record<string, CashFlowYear[] | undefined>;
  indicators: Record<string, Record<string, unknown>>;
};
type FullCycleAggregation = { prospectAnalysisId: string; pg: number; levels: string[]; fullCycleAnalyses: FullCycleAnalysis[] };
const INDICATORS = [
  "npv",
  "irr",
  "payoutYear",
  "maxExposure",
  "profitToInvestment",
  "emv",
  "breakevenPg",
  "breakevenPrice",
  "meetsRequiredIrr",
  "governmentTake",
];
const FRACTIONS = new Set(["irr", "breakevenPg"]);

function FullCycle({ aggregation }: { aggregation: FullCycleAggregation }) {
  if (aggregation.fullCycleAnalyses.length === 0) return <p class="hint">No full-cycle analysis of {aggregation.prospectAnalysisId}.</p>;
  return (
    <>
      {aggregation.fullCycleAnalyses.map((analysis) => (
        <CashFlow key={analysis.fullCycleAnalysisId} analysis={analysis} levels={aggregation.levels} />
      ))}
    </>
  );
}

function CashFlow({ analysis, levels }: { analysis: FullCycleAnalysis; levels: string[] }) {
  const { options, data } = useMemo(() => {
    const years = [...new Set(levels.flatMap((l) => (analysis.cashFlows[l] ?? []).map((y) => y.year)))].sort((a, b) => a - b);
    const series = levels.map((level) => {
      const byYear = new Map((analysis.cashFlows[level] ?? []).map((y) => [y.year, y.netCashFlow]));
      return years.map((year) => byYear.get(year) ?? null);
    });
    const options: Omit<uPlot.Options, "width" | "height"> = {
      scales: { x: { time: false } },
      axes: [{ label: "year", values: (_u: uPlot, values: number[]) => values.map(String) }, { label: "net cash flow" }],
      series: [
        { label: "year", value: (_u: uPlot, v: number | null) => String(v ?? "") },
        ...levels.map((level, i) => ({ label: level, stroke: colour(i), width: 2, points: { show: true } })),
      ],
    };
    return { options, data: [years, ...series] as uPlot.AlignedData };
  }, [analysis, levels]);
  return (
    <>
      <Section title={`Cash flow: ${analysis.name ?? analysis.fullCycleAnalysisId}`}>
        <Chart
          label={`Net cash flow per year of ${analysis.name ?? analysis.fullCycleAnalysisId} at ${levels.join(", ")} level`}
          options={options}
          data={data}
        />
      </Section>
      <Section title={`Indicators: ${analysis.name ?? analysis.fullCycleAnalysisId}`}>
        <Table caption={`Indicators per level (${analysis.resourceCase ?? ""} case)`} head={["indicator", ...levels]}>
          {INDICATORS.map((indicator) => (
            <tr key={indicator}>
              <th scope="row">{indicator}</th>
              {levels.map((level) => {
                const value = analysis.indicators[level]?.[indicator];
                return (
                  <td key={level}>
                    {FRACTIONS.has(indicator)
                      ? formatPercent(value)
                      : indicator === "payoutYear"
                        ? String(value ?? "—")
                        : formatNumber(value, 4)}
                  </td>
                );
              })}
            </tr>
          ))}
        </Table>
      </Section>
    </>
  );
}

type ScenarioAggregation = {
  multipleScenarioAnalysisId: string;
  name?: string;
  results: {
    chanceOfSuccess: { pgAtLeastOne: number };
    resources: { primaryProduct: string; products: Record<string, { unit: string; riskedMean: number }> };
    byScenario: Array<{ scenarioId: string; name: string; probability: number; pg: number; prospectAnalysisId: string }>;
  };
  outcomeTree: { method: string; primaryProduct: string; nodes: OutcomeNode[] };
};

function Scenarios({ aggregation }: { aggregation: ScenarioAggregation }) {
  const { results, outcomeTree } = aggregation;
  const primary = results.resources.products[results.resources.primaryProduct];
  const rows = outcomeRows(outcomeTree.nodes);
  return (
    <>
      <Section title={`Scenarios: ${aggregation.name ?? aggregation.multipleScenarioAnalysisId}`}>
        <dl class="facts">
          <dt>Chance of success</dt>
          <dd>{formatPercent(results.chanceOfSuccess.pgAtLeastOne)}</dd>
          <dt>Risked mean</dt>
          <dd>
            {formatNumber(primary?.riskedMean)} {primary?.unit ?? ""}
          </dd>
          <dt>Tree</dt>
          <dd>
            {outcomeTree.method}, {rows.length} terminal outcomes
          </dd>
        </dl>
        <Table caption="Scenarios" head={["scenario", "probability", "Pg", "prospect analysis"]}>
          {results.byScenario.map((s) => (
            <tr key={s.scenarioId}>
              <th scope="row">{s.name}</th>
              <td>{formatPercent(s.probability)}</td>
              <td>{formatPercent(s.pg)}</td>
              <td>{s.prospectAnalysisId}</td>
            </tr>
          ))}
        </Table>
      </Section>
      <Section title="Outcome tree" wide>
        <Table
          caption={`Terminal outcomes of the tree (${outcomeTree.primaryProduct})`}
          head={["path", "joint", "volume (mean)", "segments", "branch", "node"]}
        >
          {rows.map(({ node, path }) => (
            <tr key={node.nodeId}>
              <th scope="row">{path.join(" › ")}</th>
              <td>{formatPercent(node.jointProbability)}</td>
              <td>
                {formatNumber(node.volume?.mean)} {node.volume?.unit ?? ""}
              </td>
              <td>
                {node.segmentStates
                  ? Object.entries(node.segmentStates)
                      .map(([segment, ok]) => `${ok ? "✓" : "✗"} ${segment}`)
                      .join("  ")
                  : "—"}
              </td>
              <td>{formatPercent(node.branchProbability)}</td>
              <td>{node.kind === "otherOutcomes" ? `${node.outcomes} other outcomes` : outcomeKindLabel(node.kind)}</td>
            </tr>
          ))}
        </Table>
      </Section>
    </>
  );
}
