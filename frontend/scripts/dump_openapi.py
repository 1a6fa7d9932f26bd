"""Print the OpenAPI document of dagwright's API (the routes and models FastAPI sees), with
sorted keys, for the editor's generated types (frontend/scripts/api-types.mjs)."""

import json

from dagwright.api.app import create_app

print(json.dumps(create_app().openapi(), indent=1, sort_keys=True))
