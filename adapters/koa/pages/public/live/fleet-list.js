// The side panel: the customer's fleets, each with its trailers, a status dot in the status colour,
// the unit id, VIN, speed and heading, and when the trailer last reported. A click selects.
import { STATUS_COLOURS } from './fleet-map.js';

const time = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

/** The panel in `container`; `onSelect(trailerId)` on a click. */
export function createFleetList(container, { onSelect }) {
  const rows = new Map();

  function describe(trailer) {
    const t = trailer.telemetry;
    return t ? `${Math.round(t.speed)} mph ${t.heading} · ${time.format(new Date(t.timestamp))}` : 'no position yet';
  }

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

  /** Shows a trailer's current state in its row (status, colour, position, time). */
  function update(trailer) {
    const item = rows.get(trailer.id);
    if (!item) return false;
    item.dataset.status = trailer.status.name;
    item.querySelector('.status-dot').style.background = STATUS_COLOURS[trailer.status.name] ?? '#555';
    item.querySelector('.status-name').textContent = trailer.status.name;
    item.querySelector('.where').textContent = describe(trailer);
    if (trailer.telemetry) {
      item.dataset.lat = String(trailer.telemetry.lat);
      item.dataset.long = String(trailer.telemetry.long);
      item.dataset.timestamp = trailer.telemetry.timestamp;
    }
    const section = item.closest('section.fleet');
    if (section) section.querySelector('h2 small').textContent = summary([...section.querySelectorAll('li.trailer')].map((row) => row.dataset.status));
    return true;
  }

  /** Renders every fleet with its trailers. */
  function render(fleets, trailersByFleet) {
    rows.clear();
    const sections = fleets.map((fleet) => {
      // By unit id, as a dispatcher reads them (the API orders by the opaque id).
      const trailers = [...(trailersByFleet.get(fleet.id) ?? [])].sort((a, b) => (a.unitId ?? a.vin).localeCompare(b.unitId ?? b.vin));
      const list = element('ul', { class: 'trailers' });
      for (const trailer of trailers) {
        const item = row(trailer);
        rows.set(trailer.id, item);
        list.append(item);
        update(trailer);
      }
      return element('section', { class: 'fleet', 'data-fleet-id': String(fleet.id) }, element('h2', {}, fleet.name, element('small', {}, summary(trailers.map((t) => t.status.name)))), list);
    });
    container.replaceChildren(...(sections.length > 0 ? sections : [element('p', { class: 'hint' }, 'This customer has no fleets yet.')]));
  }

  function select(trailerId) {
    for (const [id, item] of rows) item.classList.toggle('selected', id === trailerId);
    rows.get(trailerId)?.scrollIntoView({ block: 'nearest' });
  }

  return { render, update, select };
}

/** "6 trailers · 4 OK · 1 Warning · 1 Faulted" from the trailers' status names. */
function summary(statuses) {
  const counts = ['OK', 'Warning', 'Faulted'].map((name) => [name, statuses.filter((status) => status === name).length]).filter(([, n]) => n > 0);
  return [`${statuses.length} trailers`, ...counts.map(([name, n]) => `${n} ${name}`)].join(' · ');
}
