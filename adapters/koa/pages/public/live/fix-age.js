// @ts-check
// How old a trailer's last GPS fix is, said for a person ("12 min ago"), and whether it is too old for
// its speed and position to pass as current: a speed from hours ago must not look like the speed now.

/**
 * A fix older than this is stale. Trackers report every few minutes (the demo's every 5), so half an
 * hour without one means the tracker went quiet: the trailer may be anywhere along its road since.
 */
export const STALE_AFTER_MS = 30 * 60_000;

/**
 * The age of a fix taken at `timestamp` (RFC 3339), seen at `now` (epoch ms).
 * @param {string} timestamp
 * @param {number} now
 * @returns {{ text: string, stale: boolean }}
 */
export function fixAge(timestamp, now) {
  // A fix a little ahead of this browser's clock (clocks differ) is as fresh as can be.
  const ms = Math.max(0, now - Date.parse(timestamp));
  return { text: ageText(ms), stale: ms > STALE_AFTER_MS };
}

/** @param {number} ms */
function ageText(ms) {
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 1) return 'just now';
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return `${Math.floor(hours / 24)} days ago`;
}
