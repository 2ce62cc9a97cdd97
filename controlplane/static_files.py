"""WhiteNoise as async-capable middleware.

WhiteNoise's middleware is sync-only, so under ASGI Django ran the whole chain below it
from a thread that stayed blocked for as long as the request lasted: a long-poll
(`?wait=`, accounts/waits.py) would hold a thread per waiting client. This subclass looks
static files up the same way and lets every other request pass through without a thread.
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from whitenoise.middleware import WhiteNoiseMiddleware


class AsyncWhiteNoiseMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response, *args, **kwargs):
        super().__init__(get_response, *args, **kwargs)
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self._async:
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request):
        if self.autorefresh:  # development: a file system look-up
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)
