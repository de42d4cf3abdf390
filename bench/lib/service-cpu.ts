/**
 * The CPU time a service's processes have used, read from /proc (Linux), for the benchmarks that
 * give each service's CPU per payload beside Trailwire's own (`bench/scale-out.ts`).
 *
 * A service is a process tree: PostgreSQL's postmaster forks a backend per connection and an
 * autovacuum worker now and then, and they exit when the connection closes or the work is done.
 * Summing only the processes alive at each sample loses the CPU of every child that exited between
 * two samples, which made the PostgreSQL figure come out negative (issue 41: -46.3 µs a payload,
 * when the pool's connections that had worked during the load were gone by the second sample). The
 * kernel adds a child's CPU to its parent's `cutime`/`cstime` (fields 16 and 17 of
 * /proc/<pid>/stat) when the parent reaps it, and the postmaster reaps its children, so a tree's
 * total — the root's own time, its reaped children's, and each live child's own — only grows, and
 * the difference of two samples is what the tree used between them, exited children included.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** USER_HZ: the unit of /proc/<pid>/stat's times, 100 a second on Linux. */
const MICROS_PER_TICK = 1_000_000 / 100;

/**
 * utime + stime of the process or thread whose stat file is `statPath` (`/proc/<pid>/stat`, or
 * `/proc/<pid>/task/<tid>/stat` for one thread), in ms; undefined where /proc cannot be read.
 */
export function cpuMsOfStat(statPath: string): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(statPath, 'utf8');
  } catch {
    return undefined;
  }
  // The name is in parentheses and may hold spaces: the fields are counted after its closing one.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * MICROS_PER_TICK) / 1000;
}

interface ProcessTimes {
  pid: number;
  name: string;
  ppid: number;
  /** utime + stime of the process (all its threads), in µs. */
  own: number;
  /** cutime + cstime: the CPU of its children that it has reaped, in µs. */
  reaped: number;
}

/** One process's times, or undefined when it is gone or /proc cannot be read. */
function timesOf(pid: number): ProcessTimes | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The name is in parentheses and may hold spaces: the fields are counted after its closing one.
  const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 of proc(5) (state): ppid is field 4, utime..cstime fields 14..17.
  const tick = (i: number) => Number(fields[i]) * MICROS_PER_TICK;
  return { pid, name, ppid: Number(fields[1]), own: tick(11) + tick(12), reaped: tick(13) + tick(14) };
}

/** Every process of the machine, or none where /proc cannot be read. */
function allProcesses(): ProcessTimes[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry));
  } catch {
    return [];
  }
  return entries.map((entry) => timesOf(Number(entry))).filter((times) => times !== undefined);
}

/**
 * The CPU (µs) used so far by each tree rooted at one of `roots` (pids): each root's own time and its
 * reaped children's, plus each live child's own. A root that is not a local process counts 0.
 */
export function treeCpuMicros(roots: readonly number[]): number {
  if (roots.length === 0) return 0;
  const rootSet = new Set(roots);
  let total = 0;
  for (const each of allProcesses()) {
    if (rootSet.has(each.pid)) total += each.own + each.reaped;
    else if (rootSet.has(each.ppid)) total += each.own;
  }
  return total;
}

/** The roots of the machine's trees of processes named `name` (those whose parent has another name). */
export function treeRootsNamed(name: string): number[] {
  const processes = allProcesses();
  const names = new Map(processes.map((each) => [each.pid, each.name]));
  return processes.filter((each) => each.name === name && names.get(each.ppid) !== name).map((each) => each.pid);
}

/**
 * The local process that is PostgreSQL's postmaster for a backend pid (`SELECT pg_backend_pid()`):
 * the backend's parent, when both are local `postgres` processes; else undefined (a remote server).
 */
export function postmasterOfBackend(backendPid: number): number | undefined {
  const backend = timesOf(backendPid);
  if (backend?.name !== 'postgres') return undefined;
  return timesOf(backend.ppid)?.name === 'postgres' ? backend.ppid : undefined;
}

/** The local process of a pid a service reported about itself (Redis's `process_id`), when it has `name`. */
export function localProcessNamed(pid: number, name: string): number | undefined {
  return timesOf(pid)?.name === name ? pid : undefined;
}

/**
 * The machine's CPU time so far, idle and in all, in USER_HZ ticks summed over its cores (the first
 * line of /proc/stat), or undefined where it cannot be read: two samples tell how many cores stood
 * idle between them (`idleCoresBetween`).
 */
export function machineTicks(): { idle: number; total: number } | undefined {
  let line: string;
  try {
    line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  } catch {
    return undefined;
  }
  // cpu user nice system idle iowait irq softirq steal ...: idle and iowait are time no task could run.
  const ticks = line.trim().split(/\s+/).slice(1).map(Number);
  return { idle: ticks[3]! + (ticks[4] ?? 0), total: ticks.reduce((sum, n) => sum + n, 0) };
}

/** How many of the machine's `cores` stood idle on average between two `machineTicks` samples (NaN without them). */
export function idleCoresBetween(before: ReturnType<typeof machineTicks>, after: ReturnType<typeof machineTicks>, cores: number): number {
  if (before === undefined || after === undefined || after.total <= before.total) return Number.NaN;
  return ((after.idle - before.idle) / (after.total - before.total)) * cores;
}

/**
 * How often this process's main thread (its event loop) was taken off a core while it could still
 * run (`nonvoluntary_ctxt_switches` of /proc/self/status: preempted, mostly by a process its own
 * write had woken on the same core), or undefined where /proc cannot be read.
 */
export function preemptionsOfThisThread(): number | undefined {
  try {
    return Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync('/proc/thread-self/status', 'utf8'))?.[1]);
  } catch {
    return undefined;
  }
}
