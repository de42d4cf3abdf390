#!/usr/bin/env node
// The `trailwire` command. Trailwire ships as TypeScript run through tsx, so there is no build step
// between a checkout and a working command.
import { register } from 'tsx/esm/api';

register();
await import('../adapters/cli/main.ts');
