"""Small framework-neutral helpers shared by the controller, metrics and samplers."""
