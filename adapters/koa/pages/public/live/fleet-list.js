// @ts-check
// The side panel: the customer's fleets, each with its trailers, a status dot in the status colour,
// the unit id, VIN, speed and heading, and how long ago the trailer last reported, with a "stale" mark
// when that was too long ago for its speed to be current. A click selects.
import { STATUS_COLOURS } from './fleet-map.js';
import { fixAge } from './fix-age.js';

const time = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });

/**
 * @param {string} tag
 * @param {Record<string, string>} [attributes]
 * @param {Array<Node | string>} children
 * @returns {HTMLElement}
 */
function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

/**
 * The panel in `container`; `onSelect(trailerId)` on a click.
 * @param {HTMLElement} container
 * @param {{ onSelect(trailerId: string): void }} options
 */
export function createFleetList(container, { onSelect }) {
  /** @type {Map<string, HTMLElement>} */
  const rows = new Map();

  /**
   * Fills the row's position line: speed and heading with the fix's age, or, stale, the age first and
   * the speed as what it was then.
   * @param {HTMLElement} where
   * @param {Trailer} trailer
   * @param {number} now
   * @returns {boolean} whether the fix is stale
   */
  function describe(where, trailer, now) {
    const t = trailer.telemetry;
    if (!t) {
      where.replaceChildren('no position yet');
      where.removeAttribute('title');
      return false;
    }
    const age = fixAge(t.timestamp, now);
    const motion = `${Math.round(t.speed)} mph ${t.heading}`;
    where.title = `last fix ${time.format(new Date(t.timestamp))}`;
    if (age.stale) where.replaceChildren(element('span', { class: 'stale-mark' }, 'stale'), ` last fix ${age.text} · then ${motion}`);
    else where.replaceChildren(`${motion} · ${age.text}`);
    return age.stale;
  }

  /** @param {Trailer} trailer */
  function row(trailer) {
    const dot = element('span', { class: 'status-dot', title: trailer.status.name });
    const item = element(
      'li',
      { class: 'trailer', 'data-trailer-id': trailer.id, tabindex: '0', role: 'button' },
      dot,
      element('span', { class: 'unit' }, trailer.unitId ?? '—'),
      element('span', { class: 'status-name' }, trailer.status.name),
      element('span', { class: 'vin' }, trailer.vin),
      element('span', { class: 'where' }, ''),
    );
    item.addEventListener('click', () => onSelect(trailer.id));
    item.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' || event.key === ' ') onSelect(trailer.id);
    });
    return item;
  }

  /**
   * Shows a trailer's current state in its row (status, colour, position, the fix's age at `now`).
   * @param {Trailer} trailer
   * @param {number} [now] epoch ms; default the browser's clock
   * @returns {boolean} false when the trailer has no row
   */
  function update(trailer, now = Date.now()) {
    const item = rows.get(trailer.id);
    if (!item) return false;
    item.dataset.status = trailer.status.name;
    /** @type {HTMLElement} */ (item.querySelector('.status-dot')).style.background = STATUS_COLOURS[trailer.status.name] ?? '#555';
    /** @type {HTMLElement} */ (item.querySelector('.status-name')).textContent = trailer.status.name;
    item.dataset.stale = String(describe(/** @type {HTMLElement} */ (item.querySelector('.where')), trailer, now));
    if (trailer.telemetry) {
      item.dataset.lat = String(trailer.telemetry.lat);
      item.dataset.long = String(trailer.telemetry.long);
      item.dataset.timestamp = trailer.telemetry.timestamp;
    }
    const section = item.closest('section.fleet');
    const counts = section?.querySelector('h2 small');
    if (section && counts) counts.textContent = summary([...section.querySelectorAll('li.trailer')].map((row) => /** @type {HTMLElement} */ (row).dataset.status ?? ''));
    return true;
  }

  /**
   * Renders every fleet with its trailers.
   * @param {Fleet[]} fleets
   * @param {Map<number, Trailer[]>} trailersByFleet
   */
  function render(fleets, trailersByFleet) {
    rows.clear();
    const now = Date.now();
    const sections = fleets.map((fleet) => {
      // By unit id, as a dispatcher reads them (the API orders by the opaque id).
      const trailers = [...(trailersByFleet.get(fleet.id) ?? [])].sort((a, b) => (a.unitId ?? a.vin).localeCompare(b.unitId ?? b.vin));
      const list = element('ul', { class: 'trailers' });
      for (const trailer of trailers) {
        const item = row(trailer);
        rows.set(trailer.id, item);
        list.append(item);
        update(trailer, now);
      }
      return element('section', { class: 'fleet', 'data-fleet-id': String(fleet.id) }, element('h2', {}, fleet.name, element('small', {}, summary(trailers.map((t) => t.status.name)))), list);
    });
    container.replaceChildren(...(sections.length > 0 ? sections : [element('p', { class: 'hint' }, 'This customer has no fleets yet.')]));
  }

  /** @param {string} trailerId */
  function select(trailerId) {
    for (const [id, item] of rows) item.classList.toggle('selected', id === trailerId);
    rows.get(trailerId)?.scrollIntoView({ block: 'nearest' });
  }

  return { render, update, select };
}

/**
 * "6 trailers · 4 OK · 1 Warning · 1 Faulted" from the trailers' status names.
 * @param {string[]} statuses
 */
function summary(statuses) {
  const counts = ['OK', 'Warning', 'Faulted'].map((name) => /** @type {const} */ ([name, statuses.filter((status) => status === name).length])).filter(([, n]) => n > 0);
  return [`${statuses.length} trailers`, ...counts.map(([name, n]) => `${n} ${name}`)].join(' · ');
}
