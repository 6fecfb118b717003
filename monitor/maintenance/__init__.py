"""Looking after the box itself: backups of its data and restoring them."""
