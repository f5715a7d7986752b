"""Read models: views and what-if replay."""
