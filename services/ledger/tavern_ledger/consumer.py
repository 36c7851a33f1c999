"""The ledger's ordered batch consumer is the shared one of `tavern_runtime.batchconsumer`."""

from __future__ import annotations

from tavern_runtime.batchconsumer import MAX_RETRY_DELAY_S as MAX_RETRY_DELAY_S
from tavern_runtime.batchconsumer import BatchConsumer as BatchConsumer
from tavern_runtime.batchconsumer import retry_delay as retry_delay
