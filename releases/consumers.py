"""/ws/releases/<id>/: signed-in users receive every change of one release."""

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from releases import events

UNAUTHORIZED = 4401


class ReleaseConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHORIZED)
            return
        self.group = events.group(int(self.scope["url_route"]["kwargs"]["release_id"]))
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def release_event(self, message):
        await self.send_json(message["payload"])
