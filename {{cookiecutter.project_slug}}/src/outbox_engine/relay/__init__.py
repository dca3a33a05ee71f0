"""The relay: the worker process (worker, lanes, app, options), one relay step of a box
(processor: claim, filters, strategies/, recording, outcomes), retry decisions (retry) and
failure texts (failures)."""
