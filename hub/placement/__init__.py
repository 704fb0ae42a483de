"""Where clusters are placed, as every capability asks it: environments in promotion order,
cluster types, and the one set of Unknown… errors for names that place nothing."""
