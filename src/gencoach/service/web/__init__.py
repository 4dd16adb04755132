"""The controller's HTTP API and the server it runs on."""
