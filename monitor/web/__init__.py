"""Staff pages and the dashboard socket: access, forms, views per page, the consumer."""
