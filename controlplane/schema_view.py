"""GET /api/schema/ answered from a document generated once per process (a module apart from
controlplane/openapi.py: DRF's views import that module's schema class when they load)."""

import threading

from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response


class SchemaView(SpectacularAPIView):
    """GET /api/schema/, generated once per process and API version: the document describes
    the code, which does not change while the process runs, and generating it costs a
    second or more of CPU (bench/api_scale.py)."""

    _schemas: dict = {}
    _lock = threading.Lock()

    def _get_schema_response(self, request):
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (version, request.GET.get("lang"), self.serve_public)
        with self._lock:  # one generation at a time; the others then read it
            if key not in self._schemas:
                generator = self.generator_class(
                    urlconf=self.urlconf, api_version=version, patterns=self.patterns
                )
                self._schemas[key] = generator.get_schema(request=request, public=self.serve_public)
        filename = self._get_filename(request, version)
        return Response(
            data=self._schemas[key],
            headers={"Content-Disposition": f'inline; filename="{filename}"'},
        )
