"""The system websocket: signed-in users only; relays system events and answers pings
through the channel layer, so a ping proves the Redis round trip end to end."""

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console import events

UNAUTHORIZED = 4401


class SystemConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHORIZED)
            return
        await self.channel_layer.group_add(events.SYSTEM_GROUP, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello", "user": user.get_username()})

    async def disconnect(self, code):
        await self.channel_layer.group_discard(events.SYSTEM_GROUP, self.channel_name)

    async def receive_json(self, content, **kwargs):
        if content.get("type") == "ping":
            # Sent to ourselves by channel name through the layer, not answered locally.
            await self.channel_layer.send(
                self.channel_name, {"type": "system.pong", "nonce": content.get("nonce")}
            )

    async def system_pong(self, message):
        await self.send_json(events.pong(message.get("nonce"), via="channel-layer"))

    async def system_event(self, message):
        await self.send_json(message["payload"])
