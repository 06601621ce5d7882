"""What the report shows: sections, charts, flame graphs, the HTML page and its templates."""
