"""One subpackage per framework. Each is imported only when a driver of its framework is used."""
