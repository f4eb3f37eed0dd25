print("migrate")
