"""The HTTP face: the routes (``routes/``), their dependencies, bodies, schemas, errors and
limits, the OpenAPI document, uploads, what an answer reports, the access log, disconnects, and
an answer's life at the boundary (``answers``)."""
