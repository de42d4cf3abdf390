// @ts-check
// The live fleet page: a customer key pasted into the form (kept in this module's memory, never in
// storage or cookies) → a token → the customer's fleets and trailers in the side panel and on the map
// → live updates over `GET /api/v1/live` moving them → on selection, the trailer's last 24 h track.
// Every failure the person can act on is said in the notice line.
import { ApiError, createApiClient } from './live/api.js';
import { createFleetList } from './live/fleet-list.js';
import { createFleetMap } from './live/fleet-map.js';
import { fixAge } from './live/fix-age.js';
import { startLiveStream } from './live/live-stream.js';

/** How often the fix ages on the page are said again, so "just now" does not stay for an hour. */
const AGE_REFRESH_MS = 30_000;

/** @param {string} name */
const meta = (name) => /** @type {HTMLMetaElement | null} */ (document.querySelector(`meta[name="${name}"]`))?.content ?? '';
const base = meta('trailwire-base');
/**
 * An element the page's HTML has.
 * @template {HTMLElement} [E=HTMLElement]
 * @param {string} id
 * @returns {E}
 */
const $ = (id) => /** @type {E} */ (document.getElementById(id));

const form = $('key-form');
/** @type {HTMLInputElement} */
const keyInput = $('api-key');
const forgetButton = $('forget');
const notice = $('notice');
const connection = $('connection');
const selection = $('selection');

// The panel's first words (how to connect), shown again whenever no key is connected.
const hint = /** @type {Element} */ ($('fleets').firstElementChild);
const map = createFleetMap($('map'), { base, tilesUrl: meta('trailwire-map-tiles') || undefined, onSelect: select });
const list = createFleetList($('fleets'), { onSelect: select });

/**
 * The session of one key: its API client, its trailers, its stream.
 * @typedef {{
 *   api: ReturnType<typeof createApiClient>,
 *   fleets?: Fleet[],
 *   trailers: Map<string, Trailer>,
 *   selected: string | undefined,
 *   stream: { stop(): void } | undefined,
 *   trackLength?: number,
 *   reloading?: Promise<void> | undefined,
 *   renewing?: boolean,
 *   interrupted?: boolean,
 * }} Session
 */
/** @type {Session | undefined} */
let session;

/**
 * @param {'info' | 'warning' | 'error'} kind
 * @param {string} [text]
 */
function say(kind, text) {
  notice.hidden = !text;
  notice.dataset.kind = kind;
  notice.textContent = text ?? '';
}

/**
 * @param {string} state
 * @param {string} text
 */
function setConnection(state, text) {
  connection.dataset.state = state;
  connection.textContent = text;
}

/**
 * The words for an API failure, by what the person can do about it.
 * @param {unknown} error
 */
function explain(error) {
  if (!(error instanceof ApiError)) return `The server could not be reached (${error instanceof Error ? error.message : String(error)}).`;
  if (error.status === 401) return 'That key was not accepted: it is unknown, mistyped, or was rotated. Paste a current customer key (twc_…).';
  if (error.status === 403) return 'That token is not a customer token: the live map needs a customer key (twc_…).';
  if (error.status === 429) return `Too many attempts; try again in ${error.retryAfterSeconds ?? 'a few'} seconds.`;
  return `The server answered ${error.status}: ${error.message}`;
}

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const key = keyInput.value.trim();
  if (!key) return;
  await connect(key);
});

forgetButton.addEventListener('click', () => {
  disconnect();
  say('info', 'The key is forgotten. Paste a key to connect again.');
});

function disconnect() {
  session?.stream?.stop();
  session = undefined;
  map.clear();
  $('fleets').replaceChildren(hint);
  forgetButton.hidden = true;
  selection.hidden = true;
  setConnection('idle', 'not connected');
}

/** @param {string} key */
async function connect(key) {
  disconnect();
  const api = createApiClient(base, key);
  say('info', 'Signing in…');
  setConnection('connecting', 'signing in');
  try {
    await api.authenticate();
  } catch (error) {
    // A partner key is unknown to the customers' authenticate (401): name the likely mix-up.
    const partnerKey = error instanceof ApiError && error.status === 401 && key.startsWith('twp_');
    say('error', partnerKey ? 'That is a partner key (twp_…): the live map needs a customer key (twc_…).' : explain(error));
    setConnection('idle', 'not connected');
    return;
  }
  // Signed in: the key now lives only inside `api`; the field is cleared so it is not left on screen.
  keyInput.value = '';
  forgetButton.hidden = false;
  /** @type {Session} */
  session = { api, trailers: new Map(), selected: undefined, stream: undefined };
  const current = session;
  try {
    await loadFleet(current);
  } catch (error) {
    if (session !== current) return;
    say('error', `The fleet could not be loaded: ${explain(error)}`);
    return;
  }
  if (session !== current) return;
  say('info', '');
  current.stream = startLiveStream(api, { onUpdate: (trailer) => applyUpdate(current, trailer), onState: (state, detail) => streamState(current, state, detail) });
}

/**
 * Reads the customer's fleets and trailers. The first time (or when the set of trailers changed) it
 * renders the panel and fits the map; otherwise it updates rows and markers in place, as after a
 * reconnect, when updates missed while the stream was down are caught up from the read API.
 */
/** @param {Session} current */
async function loadFleet(current) {
  /** @type {Fleet[]} */
  const fleets = await current.api.list('/api/v1/fleets?take=500');
  /** @type {Map<number, Trailer[]>} */
  const trailersByFleet = new Map();
  await Promise.all(fleets.map(async (fleet) => trailersByFleet.set(fleet.id, await current.api.list(`/api/v1/trailers/${fleet.id}?take=500`))));
  if (session !== current) return;
  const all = [...trailersByFleet.values()].flat();
  const first = current.fleets === undefined;
  const sameTrailers =
    !first &&
    fleets.length === current.fleets?.length &&
    all.length === current.trailers.size &&
    all.every((trailer) => current.trailers.get(trailer.id)?.fleetId === trailer.fleetId);
  current.fleets = fleets;
  current.trailers = new Map(all.map((trailer) => [trailer.id, trailer]));
  if (!sameTrailers) list.render(fleets, trailersByFleet);
  for (const trailer of all) {
    list.update(trailer);
    map.showTrailer(trailer);
  }
  if (current.selected) list.select(current.selected);
  if (first) map.fitTrailers();
}

/**
 * @param {Session} current
 * @param {Trailer} trailer
 */
function applyUpdate(current, trailer) {
  if (session !== current) return;
  const known = current.trailers.has(trailer.id);
  current.trailers.set(trailer.id, trailer);
  map.showTrailer(trailer);
  // A trailer new to the list (just assigned to one of the fleets): reload the panel.
  if (!known || !list.update(trailer)) {
    refresh(current);
    return;
  }
  if (trailer.id === current.selected && trailer.telemetry) {
    map.extendTrack(trailer.telemetry);
    describeSelection(trailer, current.trackLength = (current.trackLength ?? 0) + 1);
  }
}

/**
 * Reads the fleet again, once at a time; a failure is left to the next update or reconnect.
 * @param {Session} current
 */
function refresh(current) {
  current.reloading ??= loadFleet(current)
    .catch(() => {})
    .finally(() => (current.reloading = undefined));
}

/**
 * @param {Session} current
 * @param {string} state
 * @param {any} detail
 */
function streamState(current, state, detail) {
  if (session !== current) return;
  if (state === 'connecting') setConnection('connecting', 'connecting to live updates');
  else if (state === 'live') {
    setConnection('live', 'live');
    // Updates are not replayed: what changed while the stream was down is read again.
    if (current.renewing || current.interrupted) refresh(current);
    if (current.renewing) say('info', 'Session renewed: the token had expired, so the page signed in again with the key in memory and reconnected.');
    else if (current.interrupted) say('info', 'Live updates resumed.');
    current.interrupted = false;
    current.renewing = false;
  } else if (state === 'renewing') {
    current.renewing = true;
    setConnection('connecting', 'renewing session');
    say('warning', 'The session token expired; signing in again with the key in memory…');
  } else if (state === 'reconnecting') {
    current.interrupted = true;
    setConnection('reconnecting', 'reconnecting');
    say('warning', `Live updates interrupted (${detail.reason}). Reconnecting in ${Math.round(detail.delayMs / 1000)} s (attempt ${detail.attempt}).`);
  } else if (state === 'failed') {
    setConnection('idle', 'stopped');
    say('error', `Live updates stopped. ${explain(detail.error)}`);
  }
}

/** @param {string} trailerId */
async function select(trailerId) {
  const current = session;
  const trailer = current?.trailers.get(trailerId);
  if (!current || !trailer) return;
  current.selected = trailerId;
  list.select(trailerId);
  describeSelection(trailer, undefined);
  try {
    const to = new Date();
    const from = new Date(to.getTime() - 24 * 3600_000);
    /** @type {TrailerFix[]} */
    const fixes = await current.api.list(`/api/v1/trailers/telemetry/gps/${encodeURIComponent(trailerId)}?take=500&from=${from.toISOString()}&to=${to.toISOString()}`);
    if (session !== current || current.selected !== trailerId) return;
    current.trackLength = fixes.length;
    map.showTrack(trailerId, fixes);
    describeSelection(current.trailers.get(trailerId) ?? trailer, fixes.length);
  } catch (error) {
    if (session === current) say('error', `The track could not be loaded: ${explain(error)}`);
  }
}

/**
 * The footer line of the selected trailer.
 * @param {Trailer} trailer
 * @param {number | undefined} fixes the length of its track, while loading undefined
 */
function describeSelection(trailer, fixes) {
  selection.hidden = false;
  const t = trailer.telemetry;
  const age = t ? fixAge(t.timestamp, Date.now()) : undefined;
  const motion = t ? `${Math.round(t.speed)} mph ${t.heading}` : '';
  const where = t && age
    ? `${t.lat.toFixed(4)}, ${t.long.toFixed(4)} · ${age.stale ? `stale: last fix ${age.text}, then ${motion}` : `${motion} · ${age.text}`} (${new Date(t.timestamp).toLocaleString()})`
    : 'no position yet';
  const devices = `${trailer.faultedDevices} faulted, ${trailer.warningDevices} warning devices`;
  const track = fixes === undefined ? 'loading the last 24 h…' : `${fixes} fixes in the last 24 h`;
  selection.textContent = `${trailer.unitId ?? trailer.vin} (${trailer.vin}) · ${trailer.status.name} · ${devices} · ${where} · track: ${track}`;
  selection.dataset.trailerId = trailer.id;
}

// Ages move on while nothing arrives: say them again now and then, and mark the fixes that went stale.
setInterval(() => {
  const current = session;
  if (!current) return;
  const now = Date.now();
  for (const trailer of current.trailers.values()) {
    list.update(trailer, now);
    map.showTrailer(trailer, now);
  }
  const selected = current.selected === undefined ? undefined : current.trailers.get(current.selected);
  if (selected) describeSelection(selected, current.trackLength);
}, AGE_REFRESH_MS);

// The outlines load beside the rest; a page without them still works, and says why they are missing.
map.outlinesDrawn.catch((error) => say('error', `The base map could not be drawn: ${error.message}`));
