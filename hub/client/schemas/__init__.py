"""The client's own models of what the hub answers and what it is sent, a module per part of
the API. They are the client's contract, kept apart from the hub's schemas (a test holds them
to the hub's OpenAPI document), so a script or the command line needs none of the server."""
