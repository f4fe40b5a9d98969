// Starts Swagger UI on /docs. A file of its own: the page's Content-Security-Policy runs no
// inline script.
"use strict";

window.addEventListener("DOMContentLoaded", () => {
  window.ui = window.SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    // The default sends the document to validator.swagger.io for a badge; nothing leaves here.
    validatorUrl: null,
  });
});
