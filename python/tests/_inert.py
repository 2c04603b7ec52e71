"""A base for the tests' own schedulers: it knows no app and cancels nothing, so a test
writes only the dry run and schedule it is about."""

from typing import List, Optional, TypeVar

from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler

T = TypeVar("T")


class InertScheduler(Scheduler[T]):
    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        return None

    def list(self) -> List[ListAppResponse]:
        return []

    def _cancel_existing(self, app_id: str) -> None:
        pass
