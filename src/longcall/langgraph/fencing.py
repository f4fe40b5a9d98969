"""Fenced checkpoint writes: a delivery that lost its session writes nothing into the thread.

:class:`FencedCheckpointSaver` wraps the graph's own checkpointer. While a delivery runs, its
config carries the delivery's :class:`~longcall.agents.Fence` (under :data:`FENCE_KEY`, a
``__`` key LangGraph keeps out of checkpoint metadata), and every ``put`` and ``put_writes``
first asks longcall's job table whether the delivery still holds the session under that
fence, raising :class:`~longcall.errors.FenceLost` instead of writing when it does not. Runs
without a fence (a user's turn, the application's own calls) pass straight through.

It also lets a sync-only saver (``SqliteSaver``) serve async runs: an async method the
saver does not implement runs its sync twin on a thread.

What remains is the time between the check and the saver's own commit (the thread is in
another database, so the two cannot share a transaction): a holder frozen exactly there, for
longer than its lease, could still write once.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from longcall.agents import Fence

FENCE_KEY = "__longcall_fence"


def fence_of(config: RunnableConfig | None) -> Fence | None:
    """The delivery fence a run's config carries, if any."""
    fence = ((config or {}).get("configurable") or {}).get(FENCE_KEY)
    return fence if isinstance(fence, Fence) else None


class FencedCheckpointSaver(BaseCheckpointSaver[Any]):
    """A checkpointer that checks a delivery's fence right before each write."""

    def __init__(self, inner: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self._sync_only = False  # learnt from the first NotImplementedError of an async method

    # -- writes: fenced --------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if (fence := fence_of(config)) is not None:
            fence.check()
        return self.inner.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if (fence := fence_of(config)) is not None:
            fence.check()
        self.inner.put_writes(config, writes, task_id, task_path)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if (fence := fence_of(config)) is not None:
            await fence.check_async()
        if not self._sync_only:
            try:
                return await self.inner.aput(config, checkpoint, metadata, new_versions)
            except NotImplementedError:
                self._sync_only = True
        return await asyncio.to_thread(self.inner.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if (fence := fence_of(config)) is not None:
            await fence.check_async()
        if not self._sync_only:
            try:
                await self.inner.aput_writes(config, writes, task_id, task_path)
                return
            except NotImplementedError:
                self._sync_only = True
        await asyncio.to_thread(self.inner.put_writes, config, writes, task_id, task_path)

    # -- reads and the rest: the inner saver's -----------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.inner.get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        if not self._sync_only:
            try:
                return await self.inner.aget_tuple(config)
            except NotImplementedError:
                self._sync_only = True
        return await asyncio.to_thread(self.inner.get_tuple, config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self.inner.list(config, filter=filter, before=before, limit=limit)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        if not self._sync_only:
            try:
                async for item in self.inner.alist(
                    config, filter=filter, before=before, limit=limit
                ):
                    yield item
                return
            except NotImplementedError:
                self._sync_only = True
        found = await asyncio.to_thread(
            lambda: list(self.inner.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    def delete_thread(self, thread_id: str) -> None:
        self.inner.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        if not self._sync_only:
            try:
                await self.inner.adelete_thread(thread_id)
                return
            except NotImplementedError:
                self._sync_only = True
        await asyncio.to_thread(self.inner.delete_thread, thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.inner.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.inner.copy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.inner.prune(thread_ids, strategy=strategy)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    @property
    def config_specs(self) -> builtins.list[Any]:
        return self.inner.config_specs

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> FencedCheckpointSaver:
        inner = self.inner.with_allowlist(extra_allowlist)
        return self if inner is self.inner else FencedCheckpointSaver(inner)

    def __getattr__(self, name: str) -> Any:
        # Anything else a particular saver offers (setup, conn, prune, copy_thread, ...).
        return getattr(self.inner, name)


def fenced(saver: BaseCheckpointSaver[Any]) -> FencedCheckpointSaver:
    """``saver`` wrapped once (an already fenced saver is returned as it is)."""
    return saver if isinstance(saver, FencedCheckpointSaver) else FencedCheckpointSaver(saver)
