"""The built-in pages: HTML views of the API's answers, served by the hub."""
