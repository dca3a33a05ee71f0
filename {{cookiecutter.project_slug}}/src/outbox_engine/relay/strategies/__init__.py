"""Delivery strategies: how a batch's live items reach their transports or handlers.

One strategy object is chosen per box (`for_box`): outbox boxes hand items to transports
(`outbox.OutboxDelivery`, which picks per batch between `pipelined` and `ordered`), inbox
boxes run handlers in one transaction with a savepoint per item (`inbox.InboxDelivery`).
Each sets every slot's `Outcome` (relay/outcomes.py); recording is shared.
"""
