"""The relay: the worker process (worker), one relay step of a box: claim, deliver, record
(processor), retry decisions (retry) and failure texts (failures)."""
