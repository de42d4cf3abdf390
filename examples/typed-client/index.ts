/**
 * A typed HTTP client generated from `/openapi.json`: `openapi-typescript` turns the document into the
 * types of `openapi.d.ts`, and `openapi-fetch` calls the API with them — paths, parameters and bodies
 * checked by the compiler, nothing written by hand. It authenticates with a customer API key and
 * prints each fleet of the customer with its trailers.
 *
 *   npx openapi-typescript http://localhost:8080/openapi.json -o examples/typed-client/openapi.d.ts
 *   node --import tsx examples/typed-client/index.ts --api-key twc_... [--url http://localhost:8080]
 */
import { parseArgs } from 'node:util';
import createClient from 'openapi-fetch';
import type { paths } from './openapi.d.ts';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://localhost:8080' },
    'api-key': { type: 'string' },
  },
});
if (!values['api-key']) throw new Error('pass --api-key twc_... (a customer key; `npm start` prints the demo ones)');

const client = createClient<paths>({ baseUrl: values.url });

// The key goes in X-API-KEY (the security scheme `customerApiKey`); the answer is typed `AccessToken`.
const auth = await client.POST('/api/v1/customers/authenticate', { headers: { 'X-API-KEY': values['api-key'] } });
if (!auth.data) throw new Error(`authenticate: ${auth.response.status} ${auth.error?.detail ?? ''}`);
client.use({
  onRequest: ({ request }) => {
    request.headers.set('Authorization', `Bearer ${auth.data.access_token}`);
    return request;
  },
});

const fleets = await client.GET('/api/v1/fleets', { params: { query: { take: 100 } } });
if (!fleets.data) throw new Error(`fleets: ${fleets.response.status} ${fleets.error?.detail ?? ''}`);
for (const fleet of fleets.data.data) {
  console.log(`fleet ${fleet.id} ${fleet.name}`);
  const trailers = await client.GET('/api/v1/trailers/{fleetOrTrailer}', { params: { path: { fleetOrTrailer: String(fleet.id) }, query: { take: 500 } } });
  if (!trailers.data) throw new Error(`trailers: ${trailers.response.status} ${trailers.error?.detail ?? ''}`);
  // One path answers a page (a fleet id) or one trailer (a trailer id): the type says both.
  const page = 'data' in trailers.data ? trailers.data.data : [trailers.data];
  for (const trailer of page) {
    const fix = trailer.telemetry ? `${trailer.telemetry.lat.toFixed(5)},${trailer.telemetry.long.toFixed(5)} ${trailer.telemetry.timestamp}` : 'no fix yet';
    console.log(`  ${trailer.unitId ?? trailer.id} ${trailer.vin} ${trailer.status.name} ${fix}`);
  }
}
