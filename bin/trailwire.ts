#!/usr/bin/env node
/**
 * The `trailwire` command (contract 9): the application shell above the simulator, the adapters and
 * the core. The package runs it compiled (`dist/bin/trailwire.js`); a checkout's tests run this source
 * through tsx.
 */
import { hideBin } from 'yargs/helpers';
import { main } from './cli/main.ts';

await main(hideBin(process.argv));
