/**
 * `npm run bench`: every benchmark in turn, each writing its own results file under bench/results/.
 * Pass names to run some: `npm run bench -- read-paging intake`.
 */
import { runAcceptPathBench } from './accept-path.ts';
import { runExportImportBench } from './export-import.ts';
import { runFloodBench } from './flood.ts';
import { runIntakeBench } from './intake.ts';
import { runIntakeProcessingBench } from './intake-processing.ts';
import { liveFeedRunsOf, runLiveFeedBench } from './livefeed.ts';
import { runLiveStormBench } from './live-storm.ts';
import { runReadPagingBench } from './read-paging.ts';
import { runScaleOutBench } from './scale-out.ts';
import { runSimulatorBench } from './simulator.ts';
import { runWebhookBench } from './webhooks.ts';

const benches: Record<string, () => Promise<unknown>> = {
  'read-paging': () => runReadPagingBench(),
  'export-import': () => runExportImportBench(),
  'accept-path': () => runAcceptPathBench(),
  intake: () => runIntakeBench(),
  'intake-processing': () => runIntakeProcessingBench(),
  livefeed: () => runLiveFeedBench({ runs: liveFeedRunsOf(process.env.LIVEFEED_RUNS) }),
  flood: () => runFloodBench(),
  'live-storm': () => runLiveStormBench(),
  simulator: () => runSimulatorBench(),
  webhooks: () => runWebhookBench({ baselineBin: process.env.BENCH_BASELINE_BIN }),
  'scale-out': () => runScaleOutBench({ durationSeconds: process.env.BENCH_SECONDS === undefined ? undefined : Number(process.env.BENCH_SECONDS) }),
};

const chosen = process.argv.slice(2);
for (const name of chosen) if (!benches[name]) throw new Error(`unknown benchmark ${name}; choose from ${Object.keys(benches).join(', ')}`);
for (const [name, run] of Object.entries(benches)) {
  if (chosen.length > 0 && !chosen.includes(name)) continue;
  console.log(`\n=== ${name} ===`);
  await run();
}
