"""`gencoach status`: a controller's `/metrics` at a glance in the terminal."""
