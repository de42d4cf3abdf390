// The API reference: Swagger UI over this server's /openapi.json. "Try it out" sends requests to
// this origin only (the page's Content-Security-Policy allows nothing else); the schema validator
// badge, which would ask a public service, is off.
const base = document.querySelector('meta[name="trailwire-base"]').content;

window.SwaggerUIBundle({
  url: `${base}/openapi.json`,
  dom_id: '#swagger-ui',
  presets: [window.SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
  validatorUrl: null,
  deepLinking: true,
  tryItOutEnabled: false,
  // Tokens entered under Authorize live in this tab only: nothing is written to localStorage.
  persistAuthorization: false,
  displayRequestDuration: true,
});
