"""``python -m pipeline.settings``: print the configuration's JSON Schema
(``make schema`` writes it to ``config/schemas/pipeline.schema.json``)."""

import json
import sys

from pipeline.settings.load import json_schema

sys.stdout.write(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
