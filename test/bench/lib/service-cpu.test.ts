import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { it } from 'node:test';
import { idleCoresBetween, localProcessNamed, machineTicks, postmasterOfBackend, preemptionsOfThisThread, treeCpuMicros } from '../../../bench/lib/service-cpu.ts';

// The scale-out bench's service figures: a child's CPU must still count once it has exited, as a
// PostgreSQL backend's does when its pool connection closes between two samples (issue 41).
it('a tree keeps counting the CPU of a child that exited between two samples', { skip: process.platform !== 'linux' && 'reads /proc' }, async () => {
  const before = treeCpuMicros([process.pid]);
  const selfBefore = process.cpuUsage();
  // 300 ms of CPU in a child that is gone (and reaped) by the second sample. It spins until its own
  // CPU time, not the wall clock, reaches 300 ms: on a loaded machine (the suite runs two files at
  // once) 300 ms of wall time gave the child as little as 162 ms of CPU, and the test failed.
  const child = spawn(process.execPath, ['-e', 'const cpu = () => { const u = process.cpuUsage(); return u.user + u.system; }; while (cpu() < 300_000);']);
  await once(child, 'exit');
  const self = process.cpuUsage(selfBefore);
  const used = treeCpuMicros([process.pid]) - before - (self.user + self.system);
  // The child's busy loop and its start, less a tick of rounding on each of the two samples.
  assert.ok(used >= 250_000, `the exited child's CPU counts: ${Math.round(used / 1000)} ms`);
});

it('names a local process only when it is the service asked for', { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  assert.equal(localProcessNamed(process.pid, 'redis-server'), undefined);
  assert.equal(localProcessNamed(process.pid, 'node'), process.pid);
  // This process is no PostgreSQL backend, so it has no postmaster.
  assert.equal(postmasterOfBackend(process.pid), undefined);
});

it('tells the cores that stood idle between two samples of the machine', () => {
  assert.equal(idleCoresBetween({ idle: 100, total: 1000 }, { idle: 250, total: 1200 }, 2), 1.5);
  assert.ok(Number.isNaN(idleCoresBetween(undefined, { idle: 1, total: 2 }, 2)));
  assert.ok(Number.isNaN(idleCoresBetween({ idle: 1, total: 2 }, { idle: 1, total: 2 }, 2)), 'no time between the samples');
});

it('reads the machine\'s ticks and this thread\'s preemptions from /proc', { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  const ticks = machineTicks();
  assert.ok(ticks !== undefined && ticks.total > 0 && ticks.idle >= 0 && ticks.idle <= ticks.total);
  const preemptions = preemptionsOfThisThread();
  assert.ok(preemptions !== undefined && Number.isSafeInteger(preemptions) && preemptions >= 0);
});
