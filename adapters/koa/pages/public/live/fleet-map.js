// @ts-check
// The map: Leaflet drawing the world's countries and the US states from the TopoJSON shipped with
// the package (no tiles, nothing fetched elsewhere), raster tiles underneath only when the operator
// configured a tile URL, one circle per trailer at its latest position in its status colour, and
// the selected trailer's track. A trailer whose last fix is stale is drawn faded, and its tooltip says
// how old the fix is.
import { fixAge } from './fix-age.js';

const L = window.L;

/** @type {Record<string, string>} */
export const STATUS_COLOURS = { OK: '#2e8540', Warning: '#e8a400', Faulted: '#c81e1e' };

/**
 * A TopoJSON file of the package's outlines as GeoJSON features.
 * @param {string} base
 * @param {string} file
 * @param {string} object
 */
async function outline(base, file, object) {
  const response = await fetch(`${base}/assets/map/${file}`);
  if (!response.ok) throw new Error(`${file}: HTTP ${response.status}`);
  const topology = await response.json();
  const collection = window.topojson.feature(topology, topology.objects[object]);
  for (const feature of collection.features) unwrapAntimeridian(feature.geometry);
  return collection;
}

/**
 * Natural Earth's rings that cross the 180th meridian (Russia's far east, Fiji) jump from +180 to
 * -180; drawn as they are, each jump is a stripe across the whole map. Shifting the rest of such a
 * ring by 360° keeps it continuous (Leaflet draws longitudes beyond 180 where they belong).
 */
/** @param {{ type: string, coordinates: any } | null} geometry */
function unwrapAntimeridian(geometry) {
  const polygons = geometry?.type === 'Polygon' ? [geometry.coordinates] : geometry?.type === 'MultiPolygon' ? geometry.coordinates : [];
  for (const polygon of polygons)
    for (const ring of polygon) {
      let shift = 0;
      for (let i = 1; i < ring.length; i++) {
        const step = ring[i][0] + shift - ring[i - 1][0];
        if (step > 180) shift -= 360;
        else if (step < -180) shift += 360;
        ring[i][0] += shift;
      }
    }
}

/**
 * A map in `element`; `onSelect(trailerId)` when a trailer's circle is clicked.
 * @param {HTMLElement} element
 * @param {{ base: string, tilesUrl?: string | undefined, onSelect(trailerId: string): void }} options
 */
export function createFleetMap(element, { base, tilesUrl, onSelect }) {
  // A person who asked for reduced motion gets jumps instead of animated pans and zooms.
  const calm = window.matchMedia('(prefers-reduced-motion: reduce)').matches;
  const map = L.map(element, { worldCopyJump: true, minZoom: 2, zoomSnap: 0.5, zoomAnimation: !calm, fadeAnimation: !calm, markerZoomAnimation: !calm }).setView([39.5, -96], 4);
  map.attributionControl.setPrefix(false);
  if (tilesUrl) L.tileLayer(tilesUrl, { maxZoom: 19 }).addTo(map);
  const drawOutlines = async () => {
    const [countries, states] = await Promise.all([outline(base, 'countries-110m.json', 'countries'), outline(base, 'states-10m.json', 'states')]);
    const fill = !tilesUrl;
    L.geoJSON(countries, { interactive: false, style: { color: '#8aa0b4', weight: 0.8, fill, fillColor: '#f4f1ea', fillOpacity: 1 } }).addTo(map).bringToBack();
    L.geoJSON(states, { interactive: false, style: { color: '#9fb2c4', weight: 0.6, fill: false } }).addTo(map);
    map.attributionControl.addAttribution('Outlines: Natural Earth, US Census Bureau');
  };
  const outlinesDrawn = drawOutlines();

  /** @type {Map<string, any>} Leaflet circle markers by trailer id */
  const markers = new Map();
  /** @type {any} the selected trailer's Leaflet polyline */
  let track;

  /**
   * Puts a trailer's circle at its latest position in its status colour, faded when the fix is stale
   * at `now` (a trailer never located has none).
   * @param {Trailer} trailer
   * @param {number} [now] epoch ms; default the browser's clock
   */
  function showTrailer(trailer, now = Date.now()) {
    const position = trailer.telemetry;
    if (!position) return;
    const colour = STATUS_COLOURS[trailer.status.name] ?? '#555';
    let marker = markers.get(trailer.id);
    if (!marker) {
      marker = L.circleMarker([position.lat, position.long], { radius: 7, weight: 2, color: '#fff', fillOpacity: 0.95, className: `trailer-marker` });
      marker.on('click', () => onSelect(trailer.id));
      // Leaflet writes a string tooltip as HTML; the unit id is operator text (issue 29: a unit id
      // of <meta http-equiv="refresh"> navigated the tab). An element keeps it text: Leaflet
      // appends the node, and the label below only ever sets its textContent.
      marker.bindTooltip(document.createElement('span'), { className: 'trailer-tooltip' });
      marker.addTo(map);
      marker.getElement()?.setAttribute('data-trailer-id', trailer.id);
      markers.set(trailer.id, marker);
    } else marker.setLatLng([position.lat, position.long]);
    const age = fixAge(position.timestamp, now);
    marker.setStyle({ fillColor: colour, fillOpacity: age.stale ? 0.4 : 0.95, dashArray: age.stale ? '3 3' : null });
    marker.getElement()?.setAttribute('data-stale', String(age.stale));
    const tooltip = marker.getTooltip();
    const motion = `${Math.round(position.speed)} mph ${position.heading}`;
    tooltip.getContent().textContent = `${trailer.unitId ?? trailer.vin} · ${trailer.status.name} · ${age.stale ? `stale: last fix ${age.text}, then ${motion}` : `${motion} · ${age.text}`}`;
    if (tooltip.isOpen()) tooltip.update();
  }

  function fitTrailers() {
    const points = [...markers.values()].map((marker) => marker.getLatLng());
    if (points.length > 0) map.fitBounds(L.latLngBounds(points).pad(0.3), { maxZoom: 8 });
  }

  /**
   * Draws a track (GPS records, oldest first) and zooms to it; `selectedId` is raised above the others.
   * @param {string} selectedId
   * @param {TrailerFix[]} fixes
   */
  function showTrack(selectedId, fixes) {
    track?.remove();
    for (const [id, marker] of markers) marker.setRadius(id === selectedId ? 10 : 7);
    if (fixes.length === 0) return;
    track = L.polyline(fixes.map((fix) => [fix.lat, fix.long]), { color: '#17324d', weight: 3, opacity: 0.8, dashArray: '6 4', className: 'trailer-track' }).addTo(map);
    // Above the outlines, below the trailers.
    for (const marker of markers.values()) marker.bringToFront();
    markers.get(selectedId)?.bringToFront();
    map.fitBounds(track.getBounds().pad(0.2), { maxZoom: 11 });
  }

  /**
   * A new fix of the selected trailer extends its track.
   * @param {TrailerFix} fix
   */
  function extendTrack(fix) {
    track?.addLatLng([fix.lat, fix.long]);
  }

  function clear() {
    for (const marker of markers.values()) marker.remove();
    markers.clear();
    track?.remove();
    track = undefined;
  }

  return { showTrailer, fitTrailers, showTrack, extendTrack, clear, outlinesDrawn };
}
