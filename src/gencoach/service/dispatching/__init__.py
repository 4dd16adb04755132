"""Jobs: building them, handing them to the workers through RQ, holding their slots."""
