/**
 * The simulator's HTML report (`--report <file.html>`): one self-contained page — inline CSS and
 * inline SVG, no scripts, no external assets — with the run's summary (its webhook figures too, with
 * `--webhooks`), its stages, the invariant checks and their violations, the thresholds, and six
 * charts: throughput by status over time, the arrival rate asked and sent, request latency over time
 * (from due), the request latency distribution, and live-update latency (distribution and over time).
 */
import { exitCodeOf, type SimulationReport } from './report.ts';

const COLORS = { target: '#9aa3b5', accepted: '#2e9d5b', limited: '#e0a526', clientErrors: '#8a5cc7', serverErrors: '#d64545', p50: '#2f6fd6', p99: '#d64545', live: '#1d9aa8' };

interface Series {
  name: string;
  color: string;
  values: number[];
}

/** Renders the report as an HTML document. */
export function renderHtmlReport(report: SimulationReport): string {
  const seconds = report.timeline.map((entry) => String(entry.second));
  const throughput = barChart({
    title: 'Throughput and status codes per second',
    labels: seconds,
    xLabel: 'second of traffic',
    yLabel: 'requests',
    series: [
      { name: '202 accepted', color: COLORS.accepted, values: report.timeline.map((e) => e.accepted) },
      { name: '429 limited', color: COLORS.limited, values: report.timeline.map((e) => e.limited) },
      { name: 'other 4xx', color: COLORS.clientErrors, values: report.timeline.map((e) => e.clientErrors) },
      { name: '5xx / no answer', color: COLORS.serverErrors, values: report.timeline.map((e) => e.serverErrors) },
    ],
  });
  const arrivals = lineChart({
    title: 'Arrival rate: asked by the schedule and sent, per second',
    labels: seconds,
    xLabel: 'second of traffic',
    yLabel: 'requests / s',
    series: [
      { name: 'asked', color: COLORS.target, values: report.timeline.map((e) => e.targetRate) },
      { name: 'sent (by due second)', color: COLORS.accepted, values: report.timeline.map((e) => e.sent) },
    ],
  });
  const latencyOverTime = lineChart({
    title: 'Request latency per second (from when each request was due)',
    labels: seconds,
    xLabel: 'second of traffic',
    yLabel: 'ms',
    series: [
      { name: 'p50', color: COLORS.p50, values: report.timeline.map((e) => e.latencyP50) },
      { name: 'p99', color: COLORS.p99, values: report.timeline.map((e) => e.latencyP99) },
    ],
  });
  const latencyHistogram = barChart({
    title: 'Request latency distribution',
    labels: report.histograms.latency.map(([bound]) => boundLabel(bound)),
    xLabel: 'latency up to (ms)',
    yLabel: 'requests',
    series: [{ name: 'requests', color: COLORS.p50, values: report.histograms.latency.map(([, count]) => count) }],
  });
  const liveHistogram = barChart({
    title: 'Live-update latency distribution (intake request to update on the stream)',
    labels: report.histograms.liveLatency.map(([bound]) => boundLabel(bound)),
    xLabel: 'latency up to (ms)',
    yLabel: 'updates',
    series: [{ name: 'updates', color: COLORS.live, values: report.histograms.liveLatency.map(([, count]) => count) }],
  });
  const liveOverTime = lineChart({
    title: 'Live updates per second and their median latency',
    labels: seconds,
    xLabel: 'second of traffic',
    yLabel: 'updates / ms',
    series: [
      { name: 'updates received', color: COLORS.live, values: report.timeline.map((e) => e.liveUpdates) },
      { name: 'p50 latency (ms)', color: COLORS.p50, values: report.timeline.map((e) => e.liveLatencyP50) },
    ],
  });

  const verdict = { 0: 'Passed', 1: `${report.violations.length} violation(s)`, 99: `${report.thresholds.filter((t) => !t.passed).length} threshold(s) breached` }[exitCodeOf(report)];
  const passed = exitCodeOf(report) === 0;
  const summaryRows: Array<[string, string]> = [
    ['Scenario', `${report.scenario} (${report.mode}, seed ${report.seed})`],
    ['Duration / VINs', `${report.durationS} s, ${report.vins} VINs`],
    ['Rate', `${report.rate.achieved}/s achieved (target ${report.rate.target}/s)`],
    ['Sent', String(report.sent)],
    ['Accepted (202)', String(report.accepted)],
    ['Limited (429)', String(report.limited)],
    ['Errors', `${report.errors} ${report.errors > 0 ? JSON.stringify(report.statusCounts) : ''}`],
    ['Latency (from due)', `p50 ${report.latencyMs.p50} ms · p90 ${report.latencyMs.p90} ms · p99 ${report.latencyMs.p99} ms · max ${report.latencyMs.max} ms`],
    ['Service time (from sent)', `p50 ${report.serviceTimeMs.p50} ms · p90 ${report.serviceTimeMs.p90} ms · p99 ${report.serviceTimeMs.p99} ms · max ${report.serviceTimeMs.max} ms`],
    ['Processed', `${report.processing.processed} of ${report.processing.accepted} (${report.processing.failed} failed, ${report.processing.pending} pending)`],
    [
      'Live feed',
      `${report.live.subscribers} subscribers (${report.live.sseSubscribers} SSE, ${report.live.slowSubscribers} slow) · ${report.live.updates} updates · ${report.live.heartbeats} heartbeats · ${report.live.reconnects} reconnects`,
    ],
    ['Live latency', `p50 ${report.live.latencyMs.p50} ms · p99 ${report.live.latencyMs.p99} ms · max ${report.live.latencyMs.max} ms`],
    ...(report.webhooks
      ? ([
          [
            'Webhooks',
            `${report.webhooks.endpoints} endpoints · ${report.webhooks.deliveries} deliveries (${report.webhooks.redeliveries} redelivered, ${report.webhooks.invalid} invalid) · ${report.webhooks.events} events · ${report.webhooks.deleted} deleted`,
          ],
          ['Webhook latency (from the 202)', `p50 ${report.webhooks.latencyMs.p50} ms · p99 ${report.webhooks.latencyMs.p99} ms · max ${report.webhooks.latencyMs.max} ms`],
        ] satisfies Array<[string, string]>)
      : []),
  ];
  const productRows = Object.entries(report.products).map(
    ([name, p]) => `<tr><td>${esc(name)}</td><td>${p.limit.requests} per ${p.limit.windowSeconds} s</td><td>${p.sent}</td><td>${p.accepted}</td><td>${p.limited}</td></tr>`,
  );
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Trailwire simulation: ${esc(report.scenario)} (${esc(verdict)})</title>
<style>
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2430; margin: 2rem auto; max-width: 1000px; padding: 0 1rem; }
  h1 { font-size: 1.5rem; margin-bottom: .25rem; }
  h2 { font-size: 1.1rem; margin-top: 2rem; border-bottom: 1px solid #dde1ea; padding-bottom: .25rem; }
  .verdict { display: inline-block; padding: .2rem .6rem; border-radius: 4px; color: #fff; font-weight: 600; background: ${passed ? COLORS.accepted : COLORS.serverErrors}; }
  table { border-collapse: collapse; }
  td, th { padding: .2rem .8rem .2rem 0; text-align: left; vertical-align: top; }
  th { color: #5b6478; font-weight: 600; }
  .checks td:first-child { font-weight: 600; }
  .ok { color: ${COLORS.accepted}; } .fail { color: ${COLORS.serverErrors}; }
  ul.violations li { color: ${COLORS.serverErrors}; margin-bottom: .3rem; }
  figure { margin: 1.5rem 0; }
  figcaption { font-weight: 600; margin-bottom: .3rem; }
  svg text { font: 11px system-ui, sans-serif; fill: #5b6478; }
  .legend span { display: inline-block; margin-right: 1rem; font-size: 12px; }
  .legend i { display: inline-block; width: 10px; height: 10px; margin-right: .3rem; border-radius: 2px; }
</style>
</head>
<body>
<h1>Trailwire simulation: ${esc(report.scenario)}</h1>
<p><span class="verdict">${esc(verdict)}</span>${report.aborted ? ` aborted at ${report.aborted.atS} s: ${esc(report.aborted.breached.join(', '))}` : ''}</p>
<h2>Summary</h2>
<table>${summaryRows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join('')}</table>
<h2>Stages</h2>
<table><tr><th>From–to (s)</th><th>Rate asked (req/s)</th><th>Due</th><th>Sent</th><th>Achieved (req/s)</th><th>p99 (ms)</th></tr>${report.stages
    .map((st) => `<tr><td>${st.fromS}–${st.toS}</td><td>${st.startRate} → ${st.targetRate} (mean ${st.meanTargetRate})</td><td>${st.due}</td><td>${st.sent}</td><td>${st.achievedRate}</td><td>${st.latencyMs.p99}</td></tr>`)
    .join('')}</table>
<h2>Products</h2>
<table><tr><th>Product</th><th>Limit</th><th>Sent</th><th>Accepted</th><th>Limited</th></tr>${productRows.join('')}</table>
<h2>Invariants</h2>
<table class="checks">${report.checks
    .map((c) => `<tr><td class="${c.passed ? 'ok' : 'fail'}">${c.passed ? '✓' : '✗'}</td><td>${esc(c.name)}</td><td>${esc(c.judged)}</td></tr>`)
    .join('')}</table>
<h2>Thresholds</h2>
<table class="checks">${report.thresholds
    .map((t) => `<tr><td class="${t.passed ? 'ok' : 'fail'}">${t.passed ? '✓' : '✗'}</td><td>${esc(t.threshold)}</td><td>${esc(t.actual)}</td></tr>`)
    .join('')}</table>
${report.violations.length > 0 ? `<h3>Violations</h3><ul class="violations">${report.violations.map((v) => `<li>${esc(v)}</li>`).join('')}</ul>` : ''}
${report.rotations.length > 0 ? `<h2>Key rotations</h2><table><tr><th>Who</th><th>Old token</th><th>Old key</th></tr>${report.rotations.map((r) => `<tr><td>${esc(`${r.audience} ${r.subject}`)}</td><td>${r.oldTokenStatus ?? '–'}</td><td>${r.oldKeyStatus ?? '–'}</td></tr>`).join('')}</table>` : ''}
<h2>Charts</h2>
${throughput}
${arrivals}
${latencyOverTime}
${latencyHistogram}
${liveHistogram}
${liveOverTime}
</body>
</html>
`;
}

const WIDTH = 920;
const HEIGHT = 240;
const PAD = { left: 56, right: 12, top: 12, bottom: 40 };

interface ChartOptions {
  title: string;
  labels: string[];
  xLabel: string;
  yLabel: string;
  series: Series[];
}

/** Stacked bars, one stack per label. */
function barChart(options: ChartOptions): string {
  const totals = options.labels.map((_, i) => options.series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0));
  const max = niceMax(Math.max(0, ...totals));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const step = plotW / Math.max(1, options.labels.length);
  const barW = Math.max(1, step * 0.8);
  const y = (value: number) => PAD.top + plotH - (value / max) * plotH;
  const bars: string[] = [];
  options.labels.forEach((label, i) => {
    let base = 0;
    for (const s of options.series) {
      const value = s.values[i] ?? 0;
      if (value === 0) continue;
      const top = y(base + value);
      bars.push(
        `<rect x="${fmt(PAD.left + i * step + (step - barW) / 2)}" y="${fmt(top)}" width="${fmt(barW)}" height="${fmt(y(base) - top)}" fill="${s.color}"><title>${esc(`${label}: ${value} ${s.name}`)}</title></rect>`,
      );
      base += value;
    }
  });
  return figure(options, max, bars.join(''), step);
}

/** Lines, one per series. */
function lineChart(options: ChartOptions): string {
  const max = niceMax(Math.max(0, ...options.series.flatMap((s) => s.values)));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const step = plotW / Math.max(1, options.labels.length);
  const x = (i: number) => PAD.left + i * step + step / 2;
  const y = (value: number) => PAD.top + plotH - (value / max) * plotH;
  const lines = options.series.map((s) => {
    const points = s.values.map((value, i) => `${fmt(x(i))},${fmt(y(value))}`).join(' ');
    const dots = s.values.map((value, i) => `<circle cx="${fmt(x(i))}" cy="${fmt(y(value))}" r="2.5" fill="${s.color}"><title>${esc(`${options.labels[i]}: ${value} ${s.name}`)}</title></circle>`).join('');
    return `<polyline points="${points}" fill="none" stroke="${s.color}" stroke-width="2"/>${dots}`;
  });
  return figure(options, max, lines.join(''), step);
}

function figure(options: ChartOptions, max: number, body: string, step: number): string {
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const yPos = PAD.top + plotH - f * plotH;
    return `<line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${fmt(yPos)}" y2="${fmt(yPos)}" stroke="#e6e9f0"/><text x="${PAD.left - 6}" y="${fmt(yPos + 4)}" text-anchor="end">${fmtNumber(max * f)}</text>`;
  });
  // Label at most ~20 positions so they stay legible.
  const every = Math.max(1, Math.ceil(options.labels.length / 20));
  const xLabels = options.labels
    .map((label, i) => (i % every === 0 ? `<text x="${fmt(PAD.left + i * step + step / 2)}" y="${HEIGHT - PAD.bottom + 14}" text-anchor="middle">${esc(label)}</text>` : ''))
    .join('');
  const legend = options.series.map((s) => `<span><i style="background:${s.color}"></i>${esc(s.name)}</span>`).join('');
  return `<figure>
<figcaption>${esc(options.title)}</figcaption>
<div class="legend">${legend}</div>
<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${esc(options.title)}">
${ticks.join('')}
<line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${PAD.top + plotH}" y2="${PAD.top + plotH}" stroke="#9aa3b5"/>
${body}
${xLabels}
<text x="${fmt(PAD.left + (WIDTH - PAD.left - PAD.right) / 2)}" y="${HEIGHT - 6}" text-anchor="middle">${esc(options.xLabel)}</text>
<text x="14" y="${fmt(PAD.top + plotH / 2)}" text-anchor="middle" transform="rotate(-90 14 ${fmt(PAD.top + plotH / 2)})">${esc(options.yLabel)}</text>
</svg>
</figure>`;
}

function niceMax(value: number): number {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const factor of [1, 2, 2.5, 5, 10]) if (factor * magnitude >= value) return factor * magnitude;
  return 10 * magnitude;
}

function boundLabel(bound: number): string {
  return bound < 0 ? '> 5000' : `≤ ${bound}`;
}

function fmt(value: number): string {
  return value.toFixed(1);
}

function fmtNumber(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}
