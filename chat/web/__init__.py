"""The people's web side: chat pages, document and API key views, forms, the chat WebSocket consumer."""
