"""Server profiles: validation, options and argv, router presets, save/clone/delete services, loading, selectors."""
