// fixture widget script
