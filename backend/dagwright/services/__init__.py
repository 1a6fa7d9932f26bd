"""Services: apps and versions, runs, keys, secrets, publishing — over the store and the runtime."""
