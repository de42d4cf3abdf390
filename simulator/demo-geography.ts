/**
 * Where the demo fleets drive: real US cities (at their freight yards and interstate junctions, a
 * little inland from lake and river fronts) and the interstate corridors between them, each a short
 * list of waypoints that follows the highway closely enough that the straight lines between them stay
 * on land and in the region. Regions are the US Census regions; a corridor never leaves its region, so
 * a fleet that keeps to its region's corridors stays in it. Coordinates are decimal degrees (WGS 84).
 */

/** The US Census regions the demo fleets run in. */
export type Region = 'Midwest' | 'South' | 'West';

export interface Place {
  lat: number;
  long: number;
}

export interface City extends Place {
  name: string;
  region: Region;
}

/** One interstate between two cities; drivable both ways. */
export interface Corridor {
  highway: string;
  from: string;
  to: string;
  /** The waypoints between the two cities, from `from` to `to`. */
  via: Place[];
}

/** A corridor driven one way: its cities in driving order and the whole polyline. */
export interface Leg {
  corridor: Corridor;
  from: City;
  to: City;
  path: Place[];
}

type CityRow = [name: string, lat: number, long: number, region: Region];
type CorridorRow = [highway: string, from: string, to: string, via: [number, number][]];

const CITY_ROWS: CityRow[] = [
  // Midwest
  ['Chicago, IL', 41.8, -87.75, 'Midwest'],
  ['Milwaukee, WI', 43.01, -88.0, 'Midwest'],
  ['Madison, WI', 43.1, -89.3, 'Midwest'],
  ['Minneapolis, MN', 44.97, -93.25, 'Midwest'],
  ['Fargo, ND', 46.86, -96.82, 'Midwest'],
  ['Des Moines, IA', 41.6, -93.6, 'Midwest'],
  ['Omaha, NE', 41.24, -96.0, 'Midwest'],
  ['Kansas City, MO', 39.08, -94.55, 'Midwest'],
  ['Wichita, KS', 37.69, -97.3, 'Midwest'],
  ['St. Louis, MO', 38.63, -90.25, 'Midwest'],
  ['Indianapolis, IN', 39.77, -86.16, 'Midwest'],
  ['Fort Wayne, IN', 41.08, -85.14, 'Midwest'],
  ['Columbus, OH', 39.96, -83.0, 'Midwest'],
  // South
  ['Atlanta, GA', 33.75, -84.42, 'South'],
  ['Chattanooga, TN', 35.05, -85.28, 'South'],
  ['Nashville, TN', 36.16, -86.78, 'South'],
  ['Knoxville, TN', 35.96, -83.95, 'South'],
  ['Louisville, KY', 38.18, -85.73, 'South'],
  ['Memphis, TN', 35.1, -89.97, 'South'],
  ['Little Rock, AR', 34.75, -92.32, 'South'],
  ['Birmingham, AL', 33.52, -86.82, 'South'],
  ['Montgomery, AL', 32.37, -86.3, 'South'],
  ['Jackson, MS', 32.3, -90.2, 'South'],
  ['Shreveport, LA', 32.48, -93.78, 'South'],
  ['Charlotte, NC', 35.23, -80.87, 'South'],
  ['Columbia, SC', 34.02, -81.05, 'South'],
  ['Dallas, TX', 32.78, -96.82, 'South'],
  ['Houston, TX', 29.8, -95.4, 'South'],
  ['San Antonio, TX', 29.45, -98.5, 'South'],
  ['Oklahoma City, OK', 35.47, -97.52, 'South'],
  // West
  ['Los Angeles, CA', 34.02, -118.18, 'West'],
  ['Las Vegas, NV', 36.15, -115.17, 'West'],
  ['Salt Lake City, UT', 40.72, -111.93, 'West'],
  ['Phoenix, AZ', 33.43, -112.1, 'West'],
  ['Tucson, AZ', 32.2, -110.95, 'West'],
  ['Flagstaff, AZ', 35.2, -111.63, 'West'],
  ['Albuquerque, NM', 35.1, -106.65, 'West'],
  ['Denver, CO', 39.75, -104.97, 'West'],
  ['Cheyenne, WY', 41.13, -104.8, 'West'],
  ['Reno, NV', 39.53, -119.78, 'West'],
  ['Sacramento, CA', 38.6, -121.45, 'West'],
  ['Portland, OR', 45.5, -122.65, 'West'],
];

const CORRIDOR_ROWS: CorridorRow[] = [
  // Midwest
  ['I-94', 'Chicago, IL', 'Milwaukee, WI', [[41.97, -87.85], [42.2, -87.92], [42.5, -87.95], [42.85, -87.97]]],
  ['I-94', 'Milwaukee, WI', 'Madison, WI', [[43.04, -88.25], [43.07, -88.8]]],
  ['I-90', 'Chicago, IL', 'Madison, WI', [[42.02, -87.95], [42.08, -88.3], [42.25, -89.0], [42.55, -89.02], [42.72, -89.05]]],
  ['I-94', 'Madison, WI', 'Minneapolis, MN', [[43.55, -89.47], [43.8, -90.07], [43.98, -90.5], [44.3, -90.85], [44.78, -91.45], [44.95, -92.7], [44.95, -93.08]]],
  ['I-94', 'Minneapolis, MN', 'Fargo, ND', [[45.2, -93.6], [45.55, -94.16], [45.88, -95.38], [46.28, -96.08]]],
  ['I-55', 'Chicago, IL', 'St. Louis, MO', [[41.53, -88.1], [41.1, -88.43], [40.48, -88.98], [40.15, -89.36], [39.78, -89.65], [39.18, -89.67], [38.83, -89.95]]],
  ['I-80', 'Chicago, IL', 'Des Moines, IA', [[41.53, -88.1], [41.35, -89.1], [41.55, -90.45], [41.65, -91.52], [41.7, -92.72], [41.65, -93.47]]],
  ['I-80', 'Des Moines, IA', 'Omaha, NE', [[41.55, -94.1], [41.4, -95.01], [41.24, -95.86]]],
  ['I-35', 'Des Moines, IA', 'Minneapolis, MN', [[42.03, -93.58], [43.14, -93.35], [43.65, -93.37], [44.3, -93.27]]],
  ['I-35', 'Des Moines, IA', 'Kansas City, MO', [[41.03, -93.77], [40.62, -93.93], [39.74, -94.24]]],
  ['I-29', 'Kansas City, MO', 'Omaha, NE', [[39.3, -94.72], [39.77, -94.82], [40.41, -95.5], [41.05, -95.74], [41.24, -95.86]]],
  ['I-35', 'Kansas City, MO', 'Wichita, KS', [[38.81, -94.93], [38.4, -96.18], [37.82, -96.86]]],
  ['I-70', 'Kansas City, MO', 'St. Louis, MO', [[39.02, -94.28], [38.98, -93.57], [38.97, -92.74], [38.95, -92.33], [38.95, -91.93], [38.81, -90.85]]],
  ['I-70', 'St. Louis, MO', 'Indianapolis, IN', [[38.75, -90.0], [38.89, -89.41], [39.12, -88.54], [39.47, -87.41]]],
  ['I-65', 'Chicago, IL', 'Indianapolis, IN', [[41.57, -87.55], [41.56, -87.33], [41.38, -87.33], [40.94, -87.15], [40.42, -86.85], [40.05, -86.47]]],
  ['I-70', 'Indianapolis, IN', 'Columbus, OH', [[39.83, -84.89], [39.88, -84.2], [39.93, -83.8]]],
  ['I-69', 'Indianapolis, IN', 'Fort Wayne, IN', [[40.1, -85.68], [40.45, -85.5], [40.8, -85.35]]],
  // South
  ['I-75', 'Atlanta, GA', 'Chattanooga, TN', [[34.02, -84.6], [34.17, -84.8], [34.77, -84.97]]],
  ['I-24', 'Chattanooga, TN', 'Nashville, TN', [[35.0, -85.6], [35.24, -85.84], [35.48, -86.08], [35.85, -86.39]]],
  ['I-75', 'Chattanooga, TN', 'Knoxville, TN', [[35.16, -84.87], [35.6, -84.46]]],
  ['I-40', 'Knoxville, TN', 'Nashville, TN', [[35.88, -84.6], [35.95, -85.03], [36.16, -85.5], [36.2, -86.29]]],
  ['I-65', 'Nashville, TN', 'Louisville, KY', [[36.72, -86.58], [36.99, -86.44], [37.69, -85.86]]],
  ['I-40', 'Nashville, TN', 'Memphis, TN', [[36.07, -87.38], [35.62, -88.82], [35.6, -89.3], [35.22, -89.8]]],
  ['I-40', 'Memphis, TN', 'Little Rock, AR', [[35.14, -90.18], [35.01, -90.79], [34.89, -91.19], [34.78, -91.9]]],
  ['I-40', 'Little Rock, AR', 'Oklahoma City, OK', [[35.08, -92.45], [35.28, -93.13], [35.44, -94.35], [35.46, -94.79], [35.44, -95.98], [35.33, -96.93]]],
  ['I-30', 'Little Rock, AR', 'Dallas, TX', [[34.36, -92.81], [34.12, -93.05], [33.67, -93.59], [33.43, -94.05], [33.16, -94.97], [33.14, -95.6], [32.93, -96.46]]],
  ['I-20', 'Atlanta, GA', 'Birmingham, AL', [[33.73, -84.92], [33.61, -85.83]]],
  ['I-65', 'Birmingham, AL', 'Nashville, TN', [[34.17, -86.84], [34.6, -86.98], [35.2, -87.03], [35.61, -86.94]]],
  ['I-65', 'Birmingham, AL', 'Montgomery, AL', [[32.84, -86.63]]],
  ['I-85', 'Atlanta, GA', 'Montgomery, AL', [[33.38, -84.8], [33.04, -85.03], [32.6, -85.48]]],
  ['I-20', 'Birmingham, AL', 'Jackson, MS', [[33.2, -87.57], [32.58, -88.19], [32.36, -88.7], [32.36, -89.47]]],
  ['I-20', 'Jackson, MS', 'Shreveport, LA', [[32.35, -90.85], [32.51, -92.12], [32.53, -92.64]]],
  ['I-20', 'Shreveport, LA', 'Dallas, TX', [[32.5, -94.74], [32.45, -95.3], [32.74, -96.27]]],
  ['I-85', 'Atlanta, GA', 'Charlotte, NC', [[34.05, -84.07], [34.2, -83.46], [34.5, -82.65], [34.85, -82.4], [34.95, -81.93], [35.07, -81.65]]],
  ['I-77', 'Charlotte, NC', 'Columbia, SC', [[34.92, -81.03]]],
  ['I-20', 'Columbia, SC', 'Atlanta, GA', [[33.47, -82.01], [33.57, -83.18], [33.6, -83.86]]],
  ['I-45', 'Dallas, TX', 'Houston, TX', [[32.09, -96.47], [31.72, -96.16], [31.46, -96.06], [30.72, -95.55], [30.32, -95.47]]],
  ['I-35', 'Dallas, TX', 'San Antonio, TX', [[32.39, -96.85], [31.55, -97.15], [31.1, -97.35], [30.27, -97.74], [29.88, -97.94]]],
  ['I-10', 'Houston, TX', 'San Antonio, TX', [[29.78, -95.8], [29.7, -96.54], [29.68, -96.9], [29.68, -97.65], [29.57, -97.96]]],
  ['I-35', 'Dallas, TX', 'Oklahoma City, OK', [[32.95, -96.9], [33.21, -97.13], [33.62, -97.15], [34.17, -97.14], [34.74, -97.22], [35.22, -97.44]]],
  // West
  ['I-15', 'Los Angeles, CA', 'Las Vegas, NV', [[34.06, -117.6], [34.3, -117.45], [34.5, -117.3], [34.9, -117.02], [35.27, -116.07], [35.61, -115.39]]],
  ['I-15', 'Las Vegas, NV', 'Salt Lake City, UT', [[36.4, -114.9], [36.8, -114.07], [37.1, -113.58], [37.68, -113.06], [38.28, -112.64], [38.97, -112.33], [39.71, -111.84], [40.23, -111.66]]],
  ['I-10', 'Los Angeles, CA', 'Phoenix, AZ', [[34.06, -117.6], [33.93, -116.88], [33.82, -116.5], [33.72, -116.2], [33.62, -114.6], [33.45, -112.95]]],
  ['I-10', 'Phoenix, AZ', 'Tucson, AZ', [[32.88, -111.75]]],
  ['I-17', 'Phoenix, AZ', 'Flagstaff, AZ', [[34.33, -112.12], [34.56, -111.85]]],
  ['I-40', 'Flagstaff, AZ', 'Albuquerque, NM', [[35.02, -110.7], [34.9, -110.15], [35.52, -108.74], [35.15, -107.85]]],
  ['I-25', 'Albuquerque, NM', 'Denver, CO', [[35.67, -105.96], [35.6, -105.22], [36.9, -104.44], [37.17, -104.5], [38.25, -104.61], [38.83, -104.82]]],
  ['I-25', 'Denver, CO', 'Cheyenne, WY', [[40.4, -104.98]]],
  ['I-80', 'Cheyenne, WY', 'Salt Lake City, UT', [[41.31, -105.59], [41.79, -107.24], [41.59, -109.2], [41.26, -110.96], [40.92, -111.4]]],
  ['I-80', 'Salt Lake City, UT', 'Reno, NV', [[40.74, -114.04], [40.83, -115.76], [40.97, -117.73], [40.18, -118.47], [39.61, -119.25]]],
  ['I-80', 'Reno, NV', 'Sacramento, CA', [[39.33, -120.18], [39.1, -120.95], [38.75, -121.29]]],
  ['I-5', 'Sacramento, CA', 'Los Angeles, CA', [[37.95, -121.29], [37.1, -121.0], [36.14, -120.2], [35.3, -119.15], [34.84, -118.86], [34.4, -118.55]]],
  ['I-5', 'Sacramento, CA', 'Portland, OR', [[39.52, -122.19], [40.59, -122.39], [41.3, -122.33], [41.73, -122.63], [42.33, -122.87], [42.44, -123.33], [43.22, -123.34], [44.05, -123.09], [44.94, -123.03]]],
];

export const CITIES: readonly City[] = CITY_ROWS.map(([name, lat, long, region]) => ({ name, lat, long, region }));

export const CORRIDORS: readonly Corridor[] = CORRIDOR_ROWS.map(([highway, from, to, via]) => ({
  highway,
  from,
  to,
  via: via.map(([lat, long]) => ({ lat, long })),
}));

const CITY_BY_NAME = new Map(CITIES.map((city) => [city.name, city]));

/** The city of a name in the table; throws for any other name. */
export function cityNamed(name: string): City {
  const city = CITY_BY_NAME.get(name);
  if (!city) throw new Error(`demo geography: no city named ${name}`);
  return city;
}

/** The cities of a region that some corridor reaches. */
export function citiesOf(region: Region): City[] {
  return CITIES.filter((city) => city.region === region && legsFrom(city).length > 0);
}

/** Every corridor leaving `city`, each driven away from it. */
export function legsFrom(city: City): Leg[] {
  const legs: Leg[] = [];
  for (const corridor of CORRIDORS) {
    if (corridor.from === city.name) legs.push(legOf(corridor, false));
    else if (corridor.to === city.name) legs.push(legOf(corridor, true));
  }
  return legs;
}

function legOf(corridor: Corridor, reversed: boolean): Leg {
  const from = cityNamed(reversed ? corridor.to : corridor.from);
  const to = cityNamed(reversed ? corridor.from : corridor.to);
  const inner = reversed ? [...corridor.via].reverse() : corridor.via;
  return { corridor, from, to, path: [from, ...inner, to] };
}

const EARTH_RADIUS_MILES = 3958.8;
const RADIANS = Math.PI / 180;

/** Great-circle distance in miles (haversine). */
export function milesBetween(a: Place, b: Place): number {
  const dLat = (b.lat - a.lat) * RADIANS;
  const dLong = (b.long - a.long) * RADIANS;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * RADIANS) * Math.cos(b.lat * RADIANS) * Math.sin(dLong / 2) ** 2;
  return 2 * EARTH_RADIUS_MILES * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** Initial compass bearing from `a` towards `b`, in degrees [0, 360). */
export function bearingBetween(a: Place, b: Place): number {
  const lat1 = a.lat * RADIANS;
  const lat2 = b.lat * RADIANS;
  const dLong = (b.long - a.long) * RADIANS;
  const y = Math.sin(dLong) * Math.cos(lat2);
  const x = Math.cos(lat1) * Math.sin(lat2) - Math.sin(lat1) * Math.cos(lat2) * Math.cos(dLong);
  return ((Math.atan2(y, x) / RADIANS) + 360) % 360;
}
