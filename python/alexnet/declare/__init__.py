"""Settings declared once: the kinds of value a setting takes (:mod:`.kinds`) and what a declaration gives every
front end (:mod:`.declaration`)."""
