"""The example domain: orders that emit events and take payments."""
