"""Live telemetry websockets: signed-in users only; join a cluster's or a model's group and
relay the collector's points, one websocket message per payload."""

import re

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from deployments.models import TritonCluster
from models_registry.models import Model
from telemetry import events

UNAUTHORIZED = 4401
NOT_FOUND = 4404
_GROUP_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,90}$")


class _LiveConsumer(AsyncJsonWebsocketConsumer):
    group = ""

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHORIZED)
            return
        name = self.scope["url_route"]["kwargs"]["name"]
        if not _GROUP_SAFE.match(name) or not await self.exists(name):
            await self.close(code=NOT_FOUND)
            return
        self.group = self.group_for(name)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello", "group": self.group})

    async def disconnect(self, code):
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def telemetry_batch(self, message):
        for payload in message["payloads"]:
            await self.send_json(payload)


class ClusterLiveConsumer(_LiveConsumer):
    group_for = staticmethod(events.cluster_group)

    @database_sync_to_async
    def exists(self, name: str) -> bool:
        return TritonCluster.objects.filter(name=name).exists()


class ModelLiveConsumer(_LiveConsumer):
    group_for = staticmethod(events.model_group)

    @database_sync_to_async
    def exists(self, name: str) -> bool:
        return Model.objects.filter(name=name).exists()
