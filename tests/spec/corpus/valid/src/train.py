print("corpus code folder")
