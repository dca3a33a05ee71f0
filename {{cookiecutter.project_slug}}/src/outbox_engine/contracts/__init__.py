"""Event contracts: typed events and their wire form (events), the AsyncAPI document built from
the boxes (asyncapi) and the breaking-change check between two documents (check)."""
